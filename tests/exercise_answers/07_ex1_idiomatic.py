# The TF custom-training-loop tutorial's shape: a Keras loss object with reduction NONE, a tf.function step,
# the loss scaled by the replica context's all-reduced example count.
def central_step(strategy, model, optimizer, dist_batch, global_batch):
    loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(x, y):
        n = tf.distribute.get_replica_context().all_reduce("sum", tf.shape(y)[0])
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_obj(y, model(x, training=True)), global_batch_size=n)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    step = tf.function(lambda batch: strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None))
    return step(dist_batch)
