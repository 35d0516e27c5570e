"""`tpuctl doctor`'s static check of a generated 2,000-line work dir (target: under 300 ms).

The work dir is a TensorFlow training script importing 9 modules of its own (about 200
lines each: layers, input pipelines, custom steps, flags), so the imports are followed,
parsed and every check family runs over all of them. Median, min and max of 15 runs of
`check()` in one process, plus `tpuctl doctor` as a fresh process (start-up included).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpuctl.catalog import parse_accelerator  # noqa: E402
from tpuctl.services.doctor import check  # noqa: E402

RUNS = 15
MODULES = 9
BLOCKS = 5

BLOCK = """

def make_dataset_{i}(batch_size, training):
    ds = tf.data.Dataset.from_tensor_slices(([[1.0] * 8] * 1024, [[0.0]] * 1024))
    if training:
        ds = ds.shuffle(1024).repeat()
    ds = ds.map(lambda x, y: (x * 2.0, y), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def build_model_{i}(units=64):
    return tf.keras.Sequential(
        [
            tf.keras.layers.Dense(units, activation="relu"),
            tf.keras.layers.Dense(units, activation="relu"),
            tf.keras.layers.Dense(1),
        ]
    )


class Trainer{i}:
    def __init__(self, strategy, model, optimizer):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer

    @tf.function
    def train_step(self, iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((self.model(x, training=True) - y) ** 2)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        return self.strategy.run(step_fn, args=(next(iterator),))

    def evaluate(self, dataset, steps):
        total = 0.0
        iterator = iter(dataset)
        for _ in range(steps):
            total += float(self.train_step(iterator).values[0])
        return total / steps
"""


def make_workdir(root: Path) -> int:
    lines = 0
    for m in range(MODULES):
        body = "import tensorflow as tf\n" + "".join(BLOCK.format(i=i) for i in range(BLOCKS))
        (root / f"lib{m}.py").write_text(body)
        lines += body.count("\n")
    imports = "".join(f"import lib{m}\n" for m in range(MODULES))
    main = f'''"""Generated training script."""
import argparse
import os

import tensorflow as tf
{imports}

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-replica-batch", type=int, default=128)
    args = parser.parse_args()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
    batch = args.per_replica_batch * strategy.num_replicas_in_sync
    with strategy.scope():
        model = lib0.build_model_0()
        optimizer = tf.keras.optimizers.Adam(1e-3)
    trainer = lib0.Trainer0(strategy, model, optimizer)
    data = strategy.experimental_distribute_dataset(lib0.make_dataset_0(batch, True))
    trainer.evaluate(data, 100)
    model.save_weights(os.path.join(os.environ["TPUCTL_OUTPUT_DIR"], "weights"))


if __name__ == "__main__":
    main()
'''
    (root / "train.py").write_text(main)
    return lines + main.count("\n")


def main() -> None:
    acc = parse_accelerator("v3-8")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = make_workdir(root)
        findings = check(root / "train.py", root, acc)
        assert [f for f in findings if f.severity != "hint"] == [], findings
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            check(root / "train.py", root, acc)
            times.append((time.perf_counter() - start) * 1000)
        procs = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "tpuctl", "doctor", str(root / "train.py")],
                check=True,
                capture_output=True,
            )
            procs.append((time.perf_counter() - start) * 1000)
    print(f"doctor: {MODULES + 1} files, {lines} lines, {len(findings)} findings")
    print("| measured | median | min | max |")
    print("|---|---|---|---|")
    print(
        f"| check() of {lines} lines | {statistics.median(times):.0f} ms | "
        f"{min(times):.0f} ms | {max(times):.0f} ms |"
    )
    print(
        f"| `tpuctl doctor` process | {statistics.median(procs):.0f} ms | "
        f"{min(procs):.0f} ms | {max(procs):.0f} ms |"
    )


if __name__ == "__main__":
    main()
