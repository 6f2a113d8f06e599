# Notebook 07, Exercise 1: a solution. Each replica scales its loss by the GLOBAL batch (the strategy sums the
# replicas' gradients onto the parameter device); the replicas' scaled losses then SUM to the batch's mean.
def central_step(strategy, model, optimizer, dist_batch, global_batch):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    per_replica = strategy.run(replica_step, args=dist_batch)
    return strategy.reduce("SUM", per_replica, axis=None)
