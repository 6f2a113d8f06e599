# The callback after the check's callbacks, and its directory named by keyword.
def resumable_fit(model, dataset, backup_dir, callbacks):
    model.fit(dataset, epochs=SMALL_EPOCHS, steps_per_epoch=SMALL_STEPS, verbose=0,
              callbacks=callbacks + [tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir)])
