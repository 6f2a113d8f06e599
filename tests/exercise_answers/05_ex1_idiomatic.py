# As TF's distributed input tutorial writes it: batch first, then shard the batches, with a repeat and a prefetch.
def dataset_fn(input_context):
    batch_size = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    d = tf.data.Dataset.from_tensor_slices(list(range(EXAMPLES))).repeat().batch(batch_size)
    d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return d.prefetch(2)
