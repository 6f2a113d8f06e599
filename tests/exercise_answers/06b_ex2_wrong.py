# Wrong: shards of at least 1 MiB, so the 401 kB kernel stays whole on one PS.
def make_partitioner(num_ps):
    import tensorflow as tf
    return tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=1 << 20, max_shards=num_ps)
