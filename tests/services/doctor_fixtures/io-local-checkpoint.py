"""Checkpoints to a folder on the VM's disk, which goes with the node."""

import argparse

import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)
strategy = tf.distribute.TPUStrategy(resolver)

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default="/tmp/model")
args = parser.parse_args()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
model.save_weights(args.model_dir + "/weights.h5")
