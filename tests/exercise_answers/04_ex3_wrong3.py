# Wrong: Python's min() on the step works eagerly but not on the graph's symbolic step inside the optimizer.
class ReplicaWarmup(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, base_lr, warmup_steps, num_replicas):
        self.base_lr, self.warmup_steps, self.num_replicas = base_lr, warmup_steps, num_replicas

    def __call__(self, step):
        return self.base_lr * (1.0 + (self.num_replicas - 1) * min(step / self.warmup_steps, 1.0))


def warmup_schedule(strategy, base_lr, warmup_steps):
    return ReplicaWarmup(base_lr, warmup_steps, strategy.num_replicas_in_sync)
