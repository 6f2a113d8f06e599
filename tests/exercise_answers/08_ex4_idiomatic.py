# The TF input tutorial's pattern: batch size from the context, shard, shuffle, .repeat() with NO count.
EXAMPLES, GLOBAL_BATCH, EPOCHS = 64, 16, 2


def my_dataset_fn(input_context):
    batch_size = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    ds = tf.data.Dataset.range(EXAMPLES).shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.shuffle(64, seed=1).repeat().batch(batch_size).prefetch(2)
