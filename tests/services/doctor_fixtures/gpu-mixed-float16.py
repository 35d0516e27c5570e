"""The GPU mixed-precision policy."""

import tensorflow as tf

tf.keras.mixed_precision.set_global_policy("mixed_float16")
