"""Train a small MLP on synthetic regression data with JAX on a Cloud TPU, data-parallel.

Every device of the slice holds a replica of the parameters; each step, each device takes
its share of the global batch, the gradients are averaged over all devices (`pmean`
inside `pmap`), and every replica applies the same update. On a multi-host slice the same
script runs on every worker (tpuctl starts it everywhere) and
`jax.distributed.initialize()` joins them into one computation. Parameters are saved to
$TPUCTL_OUTPUT_DIR at the end.

    tpuctl run examples/jax_tpu.py --accelerator v4-8 --setup "pip install -r requirements-jax.txt"

Install `jax[tpu]` on the VM (requirements-jax.txt); `tpuctl doctor` checks it.
"""

from __future__ import annotations

import argparse
import functools
import os
import pickle

import jax
import jax.numpy as jnp
import numpy as np

PER_DEVICE_BATCH = 128


def init_params(key: jax.Array, sizes: list[int]) -> list[tuple[jax.Array, jax.Array]]:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        (jax.random.normal(k, (m, n)) * jnp.sqrt(2.0 / m), jnp.zeros(n))
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def predict(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return (x @ w + b).squeeze(-1)


def loss_fn(params, x: jax.Array, y: jax.Array) -> jax.Array:  # noqa: ANN001
    return jnp.mean((predict(params, x) - y) ** 2)


@functools.partial(jax.pmap, axis_name="devices")
def train_step(params, x: jax.Array, y: jax.Array, lr: jax.Array):  # noqa: ANN001, ANN201
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    grads = jax.lax.pmean(grads, axis_name="devices")
    params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return params, jax.lax.pmean(loss, axis_name="devices")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args(argv)

    jax.distributed.initialize()  # joins the workers of a multi-host slice
    devices = jax.local_device_count()
    print(f"process {jax.process_index()} of {jax.process_count()}: {devices} local "
          f"devices, {jax.device_count()} in all", flush=True)  # fmt: skip

    dim = 16
    true_w = np.random.default_rng(0).normal(size=dim)
    rng = np.random.default_rng(1 + jax.process_index())
    params = init_params(jax.random.PRNGKey(0), [dim, 64, 64, 1])
    replicated = jax.device_put_replicated(params, jax.local_devices())
    lr = jnp.full((devices,), args.lr)
    loss = jnp.zeros(devices)
    for step in range(1, args.steps + 1):
        x = rng.normal(size=(devices, PER_DEVICE_BATCH, dim)).astype(np.float32)
        y = (np.sin(x @ true_w)).astype(np.float32)
        replicated, loss = train_step(replicated, x, y, lr)
        if step % 50 == 0:
            print(f"step {step:5d}  loss {float(loss[0]):.4f}", flush=True)

    if jax.process_index() == 0:
        out = os.environ.get("TPUCTL_OUTPUT_DIR", "outputs")
        os.makedirs(out, exist_ok=True)
        host_params = jax.device_get(jax.tree_util.tree_map(lambda a: a[0], replicated))
        with open(os.path.join(out, "params.pkl"), "wb") as f:
            pickle.dump(host_params, f)
        print(f"done: loss {float(loss[0]):.4f}, parameters in {out}", flush=True)


if __name__ == "__main__":
    main()
