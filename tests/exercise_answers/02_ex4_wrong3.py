# Wrong: the right magnitude, negated (a log-likelihood instead of a loss).
def weighted_replica_loss(labels, logits, weights):
    per_example = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    total = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(weights))
    return -tf.reduce_sum(weights * per_example) / total
