# Wrong: MirroredStrategy ignores TF_CONFIG, so every process trains its own model.
def train_worker():
    import tensorflow as tf
    from distsim.datasets import mnist_subset

    strategy = tf.distribute.MirroredStrategy()
    data = mnist_subset(320, 1)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data.x_train, data.y_train, batch_size=64, epochs=1, verbose=0)
    return model
