"""The GPU script's per-GPU batch, from a flag, used as the dataset's batch."""

import argparse

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
strategy = tf.distribute.TPUStrategy(resolver)

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size-per-replica", type=int, default=128)
args = parser.parse_args()
ds = tf.data.Dataset.range(1000).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
batch = args.batch_size_per_replica
train_ds = ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
