# tf.saved_model.save, and the non-chief's copy next to export_dir (as the TF multi-worker tutorial's
# write_filepath does), removed afterwards.
import os
import shutil


def export_and_reload(model, strategy, export_dir):
    chief = strategy.extended.should_checkpoint
    path = export_dir if chief else os.path.join(os.path.dirname(export_dir), "workertemp_1")
    tf.saved_model.save(model, path)
    if not chief:
        shutil.rmtree(path)
    with strategy.scope():
        replicated = tf.saved_model.load(export_dir)
    return tf.saved_model.load(export_dir), replicated
