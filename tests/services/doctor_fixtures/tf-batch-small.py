"""A GPU script's global batch of 64 on a v3-8: 8 examples a core a step."""

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
strategy = tf.distribute.TPUStrategy(resolver)

BATCH_SIZE = 64
ds = tf.data.Dataset.range(1000).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
train_ds = ds.batch(BATCH_SIZE, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
