# Wrong: the step is called directly, not through strategy.run, so apply_gradients has no replica context.
def coordinator_loop(strategy, coordinator, model, optimizer, dataset_fn, steps):
    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)

    @tf.function
    def worker_step(iterator):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        x, y = next(iterator)
        return replica_step(x, y)

    for _ in range(steps):
        coordinator.schedule(worker_step, args=(per_worker_iterator,))
    coordinator.join()   # schedule returns at once: wait until every scheduled step has run
