# Notebook 04, Exercise 3: a solution. Goyal et al. (2017): the rate rises linearly from base_lr at step 0 to
# base_lr x replicas at step warmup_steps, then stays. The optimizer calls the schedule with its step counter (an
# int64 tensor) inside its tf.function, so the schedule uses TensorFlow ops only.
class ReplicaWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, base_lr, warmup_steps, num_replicas):
        self.base_lr, self.warmup_steps, self.num_replicas = base_lr, warmup_steps, num_replicas

    def __call__(self, step):
        done = tf.minimum(tf.cast(step, tf.float32) / self.warmup_steps, 1.0)   # share of the warm-up done
        return self.base_lr * (1.0 + (self.num_replicas - 1) * done)

    def get_config(self):
        return {"base_lr": self.base_lr, "warmup_steps": self.warmup_steps, "num_replicas": self.num_replicas}


def warmup_schedule(strategy, base_lr, warmup_steps):
    return ReplicaWarmup(base_lr, warmup_steps, strategy.num_replicas_in_sync)
