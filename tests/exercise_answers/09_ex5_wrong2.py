# Wrong: every worker writes to export_dir, the chief's path.
def export_and_reload(model, strategy, export_dir):
    model.save(export_dir)
    loaded = tf.saved_model.load(export_dir)
    with strategy.scope():
        return loaded, tf.saved_model.load(export_dir)
