# Idiomatic, as in TensorFlow's parameter-server tutorial: the dataset distributed with
# distribute_datasets_from_function inside a per-worker function, a Keras loss without its AUTO reduction (which
# tf_keras refuses under a strategy outside fit), 5 updates per scheduled function,
# and the results fetched with coordinator.fetch (which waits only for those) before join.
def coordinator_loop(strategy, coordinator, model, optimizer, dataset_fn, steps):
    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def five_steps(iterator):
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_fn(y, model(x, training=True)))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        loss = tf.constant(0.0)
        for _ in tf.range(5):
            loss = strategy.run(step, args=next(iterator))
        return loss

    losses = [coordinator.schedule(five_steps, args=(iterator,)) for _ in range(steps // 5)]
    print("last loss:", coordinator.fetch(losses[-1]))
    coordinator.join()
