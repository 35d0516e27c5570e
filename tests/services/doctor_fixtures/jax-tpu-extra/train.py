"""requirements.txt asks for jax without [tpu]."""

import jax

print(jax.devices())
