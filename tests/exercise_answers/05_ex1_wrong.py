# Wrong: batched right, but not sharded: both workers read the same examples.
def dataset_fn(input_context):
    ds = tf.data.Dataset.range(EXAMPLES)
    return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH))
