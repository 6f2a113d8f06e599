# Wrong: ModelCheckpoint writes checkpoints, but fit never reads them back.
def resumable_fit(model, dataset, backup_dir, callbacks):
    save = tf.keras.callbacks.ModelCheckpoint(backup_dir + "/ckpt", save_weights_only=True)
    model.fit(dataset, epochs=SMALL_EPOCHS, steps_per_epoch=SMALL_STEPS, verbose=0, callbacks=[save, *callbacks])
