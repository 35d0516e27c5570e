"""The strategy is created before the TPU system is initialized."""

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
strategy = tf.distribute.TPUStrategy(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
