# Wrong: off by one, counting steps from 1 (the optimizer's first update has step 0).
class ReplicaWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, base_lr, warmup_steps, num_replicas):
        self.base_lr, self.warmup_steps, self.num_replicas = base_lr, warmup_steps, num_replicas

    def __call__(self, step):
        done = tf.minimum((tf.cast(step, tf.float32) + 1.0) / self.warmup_steps, 1.0)
        return self.base_lr * (1.0 + (self.num_replicas - 1) * done)


def warmup_schedule(strategy, base_lr, warmup_steps):
    return ReplicaWarmup(base_lr, warmup_steps, strategy.num_replicas_in_sync)
