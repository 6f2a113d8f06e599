# A built-in Keras schedule: PolynomialDecay with power 1 "decays" linearly from its initial to its end rate over
# decay_steps and then holds the end rate; with end > initial that is the linear warm-up.
def warmup_schedule(strategy, base_lr, warmup_steps):
    return tf.keras.optimizers.schedules.PolynomialDecay(
        initial_learning_rate=base_lr, decay_steps=warmup_steps,
        end_learning_rate=base_lr * strategy.num_replicas_in_sync, power=1.0)
