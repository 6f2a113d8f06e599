# Wrong: imports a TF API path as a module, which fails in the demo's process.
def make_partitioner(num_ps):
    from tensorflow.distribute.experimental.partitioners import MaxSizePartitioner
    return MaxSizePartitioner(max_shard_bytes=128 << 10)
