# Notebook 09, Exercise 4: a solution. BackupAndRestore saves fit's state (weights, optimizer, epoch) in
# backup_dir after every epoch and, when fit starts again with the same directory, restores it first.
def resumable_fit(model, dataset, backup_dir, callbacks):
    backup = tf.keras.callbacks.BackupAndRestore(backup_dir)
    model.fit(dataset, epochs=SMALL_EPOCHS, steps_per_epoch=SMALL_STEPS, verbose=0, callbacks=[backup, *callbacks])
