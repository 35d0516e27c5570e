"""A JAX script for a multi-host slice that never calls jax.distributed.initialize()."""

import jax
import jax.numpy as jnp

print(jax.device_count(), jax.pmap(lambda x: x * 2)(jnp.ones(jax.local_device_count())))
