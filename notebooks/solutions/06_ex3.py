# Notebook 06, Exercise 3: a solution. MaxSizePartitioner cuts a variable into as few shards as keep each one
# within max_shard_bytes (the 401,408-byte kernel into 4); smaller variables stay whole.
def make_partitioner(num_ps):
    import tensorflow as tf   # this function runs in the cluster's process, not in this kernel
    return tf.distribute.experimental.partitioners.MaxSizePartitioner(max_shard_bytes=128 * 1024)
