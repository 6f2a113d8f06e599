# Wrong: each replica's own mean, so the summed gradient is num_replicas times too long.
def central_step(strategy, model, optimizer, dist_batch, global_batch):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return strategy.reduce("MEAN", strategy.run(replica_step, args=dist_batch), axis=None)
