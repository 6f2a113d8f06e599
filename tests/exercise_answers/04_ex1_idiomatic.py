# A tf.data pipeline batched by the global batch, as the TF distributed-training tutorial does.
def train_mnist(strategy, x, y, per_replica_batch=32):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                                     tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    global_batch = per_replica_batch * strategy.num_replicas_in_sync
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch), epochs=1, verbose=0)
    return model
