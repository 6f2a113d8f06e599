# Notebook 05, Exercise 1: a solution. distribute_datasets_from_function neither shards nor batches: each worker
# keeps its own shard (its input_pipeline_id of num_input_pipelines) and batches by the per-replica size.
EXAMPLES, GLOBAL_BATCH = 64, 16   # what every worker of the check uses


def dataset_fn(input_context):
    import tensorflow as tf   # this runs in the workers: this kernel never imports TensorFlow
    ds = tf.data.Dataset.range(EXAMPLES)
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH))
