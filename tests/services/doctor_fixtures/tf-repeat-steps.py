"""fit() on a dataset repeated forever, without steps_per_epoch."""

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
strategy = tf.distribute.TPUStrategy(resolver)


def make_dataset():
    ds = tf.data.Dataset.from_tensor_slices(([[1.0]] * 1024, [[2.0]] * 1024))
    return ds.repeat().batch(1024, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
train_ds = make_dataset()
model.fit(train_ds, epochs=3)
