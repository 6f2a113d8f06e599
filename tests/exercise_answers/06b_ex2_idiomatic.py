# Shards of at least 256 KiB, at most one per PS: the 401 kB kernel splits in two, the small variables stay whole.
def make_partitioner(num_ps):
    import tensorflow as tf
    partitioners = tf.distribute.experimental.partitioners
    return partitioners.MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=num_ps)
