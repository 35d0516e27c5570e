"""The GPU script's device placement: on a TPU VM those ops run on the CPU."""

import tensorflow as tf

with tf.device("/gpu:0"):
    x = tf.constant([1.0, 2.0]) * 2.0
