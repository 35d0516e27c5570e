"""Plain Keras with no strategy: it trains on the TPU VM's CPU."""

import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
model.compile(optimizer="adam", loss="mse")
