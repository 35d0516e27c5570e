"""dataset.map without num_parallel_calls."""

import tensorflow as tf

ds = tf.data.Dataset.range(1000).map(lambda x: x * 2)
train_ds = ds.batch(64, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
