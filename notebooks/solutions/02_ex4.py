# Notebook 02, Exercise 4: a solution. Every replica divides its weighted sum by the total weight over ALL
# replicas, so that the all-reduce's sum of the replicas' gradients is the gradient of the weighted mean.
def weighted_replica_loss(labels, logits, weights):
    """This replica's loss; labels (n,), logits (n, 10) and weights (n,) are its own n examples."""
    per_example = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    total_weight = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(weights))
    return tf.reduce_sum(weights * per_example) / total_weight
