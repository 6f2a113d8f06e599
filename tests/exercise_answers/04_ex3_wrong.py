# Wrong: a warm-up to base_lr, never scaled by the replica count.
class Warmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, base_lr, warmup_steps):
        self.base_lr, self.warmup_steps = base_lr, warmup_steps

    def __call__(self, step):
        return self.base_lr * tf.minimum(tf.cast(step, tf.float32) / self.warmup_steps, 1.0)


def warmup_schedule(strategy, base_lr, warmup_steps):
    return Warmup(base_lr, warmup_steps)
