# Wrong: imports a TF API path as a module, which fails in the demo's process.
def make_partitioner(num_ps):
    from tensorflow.distribute.experimental.partitioners import MinSizePartitioner
    return MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=num_ps)
