"""The model comes from the work dir's own module, called before the scope."""

import tensorflow as tf
from model_lib import build

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
strategy = tf.distribute.TPUStrategy(resolver)

model = build()
with strategy.scope():
    model.compile(optimizer="adam", loss="mse")
