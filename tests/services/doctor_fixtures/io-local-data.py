"""Training data read from the laptop's home folder."""

import tensorflow as tf

DATA = "/Users/alice/datasets/train.tfrecord"
ds = tf.data.TFRecordDataset(DATA).map(tf.io.parse_tensor, num_parallel_calls=8)
