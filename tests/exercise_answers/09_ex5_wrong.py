# Wrong: both copies loaded outside strategy.scope(), so neither has distributed variables.
def export_and_reload(model, strategy, export_dir):
    if strategy.extended.should_checkpoint:
        model.save(export_dir)
    return tf.saved_model.load(export_dir), tf.saved_model.load(export_dir)
