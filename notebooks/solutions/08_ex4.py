# Notebook 08, Exercise 4: a solution. Shard by pipeline first, shuffle (reshuffled every epoch) before
# repeating, and batch by the per-replica size that the InputContext computes from the global batch.
EXAMPLES, GLOBAL_BATCH, EPOCHS = 64, 16, 2


def my_dataset_fn(input_context):
    ds = tf.data.Dataset.range(EXAMPLES)
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.shuffle(EXAMPLES, seed=0, reshuffle_each_iteration=True).repeat(EPOCHS)
    return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH))
