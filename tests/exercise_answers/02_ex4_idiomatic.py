# A Keras loss object with reduction NONE weighs each example (sample_weight); compute_average_loss divides by
# the all-reduced total weight.
def weighted_replica_loss(labels, logits, weights):
    loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    total = tf.distribute.get_replica_context().all_reduce("sum", tf.reduce_sum(weights))
    return tf.reduce_sum(loss_obj(labels, logits, sample_weight=weights)) / total
