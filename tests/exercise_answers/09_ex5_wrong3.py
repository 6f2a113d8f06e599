# Wrong: the non-chief saves to a temporary folder next to export_dir and leaves it there.
import os


def export_and_reload(model, strategy, export_dir):
    chief = strategy.extended.should_checkpoint
    model.save(export_dir if chief else os.path.join(os.path.dirname(export_dir), "worker_copy"))
    loaded = tf.saved_model.load(export_dir)
    with strategy.scope():
        return loaded, tf.saved_model.load(export_dir)
