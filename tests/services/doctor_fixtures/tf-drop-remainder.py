"""The training batches keep a smaller last batch."""

import tensorflow as tf

ds = tf.data.Dataset.range(1000).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
train_ds = ds.shuffle(1000).batch(64).prefetch(tf.data.AUTOTUNE)
