"""A small, real training job for tpuctl: logistic regression on synthetic data, NumPy only.

It trains a linear classifier with mini-batch SGD, prints the loss as it goes, saves a
checkpoint to $TPUCTL_OUTPUT_DIR every few steps and, when a checkpoint is already
there (a restarted job, e.g. after a spot preemption), resumes from it so the loss
continues instead of starting over. On SIGTERM (a spot VM's preemption notice, or a
`tpuctl cancel`) it saves a checkpoint of the step it is at and exits: tpuctl syncs the
outputs a last time, so the restarted job resumes from there.

    tpuctl run examples/train.py --accelerator v3-8 -- --steps 200 --lr 0.5
    python examples/train.py --steps 50          # locally, outputs in ./outputs
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np


def make_data(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian blobs separated along a random direction (same data on every run)."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=dim)
    direction /= np.linalg.norm(direction)
    labels = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, dim)) + np.outer(2 * labels - 1, direction) * 1.5
    return x.astype(np.float64), labels.astype(np.float64)


def loss_and_grad(
    w: np.ndarray, b: float, x: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray, float]:
    z = x @ w + b
    p = 1.0 / (1.0 + np.exp(-z))
    eps = 1e-12
    loss = float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
    err = (p - y) / len(y)
    return loss, x.T @ err, float(err.sum())


def save(path: Path, step: int, w: np.ndarray, b: float, loss: float) -> None:
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, step=step, w=w, b=b, loss=loss)
    os.replace(tmp, path)  # a preemption mid-write never leaves a torn checkpoint


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per step (to watch it)")
    args = ap.parse_args(argv)

    out = Path(os.environ.get("TPUCTL_OUTPUT_DIR", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    worker = int(os.environ.get("TPUCTL_WORKER_ID", "0"))
    workers = int(os.environ.get("TPUCTL_NUM_WORKERS", "1"))
    ckpt = out / f"checkpoint-worker{worker}.npz"

    x, y = make_data(8192, args.dim)
    # Each worker trains on its own shard, as data-parallel jobs do.
    x, y = x[worker::workers], y[worker::workers]
    w, b, start = np.zeros(args.dim), 0.0, 0
    if ckpt.exists():
        state = np.load(ckpt)
        w, b, start = state["w"], float(state["b"]), int(state["step"])
        print(f"resumed from step {start} (loss {float(state['loss']):.4f})", flush=True)
    rng = np.random.default_rng(1000 + worker + start)
    loss = float("nan")
    stopping: list[int] = []  # the signal, once one came (it may come twice)
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    for step in range(start + 1, args.steps + 1):
        if stopping:
            save(ckpt, step - 1, w, b, loss)
            print(f"SIGTERM at step {step - 1}: checkpoint saved", flush=True)
            return 128 + signal.SIGTERM
        idx = rng.integers(0, len(y), size=args.batch)
        loss, gw, gb = loss_and_grad(w, b, x[idx], y[idx])
        w -= args.lr * gw
        b -= args.lr * gb
        if step % 10 == 0 or step == args.steps:
            print(f"step {step:5d}  loss {loss:.4f}", flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            save(ckpt, step, w, b, loss)
        if args.sleep:
            time.sleep(args.sleep)
    full_loss, _, _ = loss_and_grad(w, b, x, y)
    accuracy = float(np.mean(((x @ w + b) > 0) == (y > 0.5)))
    metrics = {
        "steps": args.steps,
        "loss": full_loss,
        "accuracy": accuracy,
        "worker": worker,
        "restart": int(os.environ.get("TPUCTL_RESTART", "0")),
    }
    (out / f"metrics-worker{worker}.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"done: loss {full_loss:.4f}, accuracy {accuracy:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
