# As TF's multi-worker Keras tutorial: the cluster resolver named explicitly, fit on NumPy arrays, 5 steps of 64.
def train_worker():
    import tensorflow as tf
    from distsim.datasets import mnist_subset

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    data = mnist_subset(320, 1)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(32, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data.x_train, data.y_train, batch_size=64, epochs=1, verbose=0)
    return model
