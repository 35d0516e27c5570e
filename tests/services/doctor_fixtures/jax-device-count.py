"""pmap over a hard-coded 8 devices: a v4-8 host has 4."""

import jax
import numpy as np

x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
print(jax.pmap(lambda v: v * 2)(x))
