# Wrong: inside the scope, but fit's batch_size is taken as the per-replica batch.
def train_mnist(strategy, x, y, per_replica_batch=32):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)), tf.keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=per_replica_batch, epochs=1, verbose=0)
    return model
