# Notebook 05b, Exercise 3: a solution. The strategy comes first: it reads TF_CONFIG and sets up the collectives
# before any other TensorFlow op runs; the model is built inside its scope, and fit shards the dataset by worker.
def train_worker():
    import tensorflow as tf
    from distsim.datasets import mnist_subset

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = mnist_subset(640, 1)
    ds = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train)).shuffle(640, seed=0).repeat().batch(64)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)), tf.keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(ds, epochs=1, steps_per_epoch=5, verbose=0)
    return model
