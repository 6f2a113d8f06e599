# Notebook 04, Exercise 1: a solution. Variables created inside strategy.scope() are MirroredVariables, and
# fit's batch_size is the GLOBAL batch: per-replica batch times the number of replicas.
def train_mnist(strategy, x, y, per_replica_batch=32):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                                     tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=per_replica_batch * strategy.num_replicas_in_sync, epochs=1, verbose=0)
    return model
