# Notebook 09, Exercise 5: a solution. Every worker saves (saving reads distributed variables, a collective), but
# only the chief writes where everybody reads; the others write a temporary copy and delete it. Loaded outside a
# strategy the model has plain variables (to serve on one device); loaded inside strategy.scope(), mirrored ones.
import tempfile


def export_and_reload(model, strategy, export_dir):
    if strategy.extended.should_checkpoint:          # the chief
        model.save(export_dir)
    else:
        scratch = tempfile.mkdtemp()
        model.save(scratch)
        tf.io.gfile.rmtree(scratch)
    loaded = tf.saved_model.load(export_dir)
    with strategy.scope():
        loaded_in_scope = tf.saved_model.load(export_dir)
    return loaded, loaded_in_scope
