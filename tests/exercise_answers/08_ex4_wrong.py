# Wrong: shuffles after repeating, so an epoch's batches mix the two passes.
EXAMPLES, GLOBAL_BATCH, EPOCHS = 64, 16, 2


def my_dataset_fn(input_context):
    ds = tf.data.Dataset.range(EXAMPLES).shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.repeat(EPOCHS).shuffle(64, seed=1).batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH))
