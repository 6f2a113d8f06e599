# Wrong: every worker reads all the examples (no shard).
EXAMPLES, GLOBAL_BATCH, EPOCHS = 64, 16, 2


def my_dataset_fn(input_context):
    ds = tf.data.Dataset.range(EXAMPLES).shuffle(64, seed=1).repeat(EPOCHS)
    return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH))
