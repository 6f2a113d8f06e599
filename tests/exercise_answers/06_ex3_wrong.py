# Wrong: the lesson's partitioner: at least 64 KiB per shard and one shard per PS leaves 200,704-byte parts.
def make_partitioner(num_ps):
    import tensorflow as tf
    return tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=64 * 1024, max_shards=num_ps)
