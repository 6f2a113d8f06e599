# Wrong: the scaled rate from the first step, no warm-up.
def warmup_schedule(strategy, base_lr, warmup_steps):
    return tf.keras.optimizers.schedules.PiecewiseConstantDecay([warmup_steps], [base_lr * strategy.num_replicas_in_sync] * 2)
