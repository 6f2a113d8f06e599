# Wrong: each replica divides by its own total weight (its own weighted mean): the sum is ~4 times too long.
def weighted_replica_loss(labels, logits, weights):
    per_example = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return tf.reduce_sum(weights * per_example) / tf.reduce_sum(weights)
