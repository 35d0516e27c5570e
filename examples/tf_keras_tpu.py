"""Train a small convolutional classifier on MNIST with TensorFlow on a Cloud TPU.

It follows the Cloud TPU guide for TensorFlow: connect to and initialize the TPU system,
create a TPUStrategy, build the model, optimizer and metrics in its scope, feed a tf.data
pipeline with static batch shapes (drop_remainder=True) and prefetch, and run a custom
training step compiled with @tf.function, several steps per call. Checkpoints go to
$TPUCTL_OUTPUT_DIR, which tpuctl uploads as the job runs; a restarted job (after a spot
preemption) resumes from the last one.

    tpuctl run examples/tf_keras_tpu.py --accelerator v3-8 \\
        --version tpu-vm-tf-2.16.0-pjrt -- --epochs 5

It needs a TPU VM image with TensorFlow (tpu-vm-tf-*); `tpuctl doctor` checks it.
"""

from __future__ import annotations

import argparse
import os

import tensorflow as tf

PER_REPLICA_BATCH = 128  # per TPU core; the global batch is this times the cores
STEPS_PER_CALL = 50  # training steps run on the TPU per call from the host


def connect_to_tpu() -> tf.distribute.TPUStrategy:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def normalize(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.cast(image, tf.float32)[..., tf.newaxis] / 255.0, tf.cast(label, tf.int64)


def make_dataset(images, labels, batch_size: int, training: bool) -> tf.data.Dataset:  # noqa: ANN001
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    if training:
        ds = ds.shuffle(10_000).repeat()
    ds = ds.map(normalize, num_parallel_calls=tf.data.AUTOTUNE)
    # Static shapes: the TPU compiles one program for one batch shape.
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def build_model() -> tf.keras.Model:
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.Conv2D(64, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    args = ap.parse_args(argv)

    strategy = connect_to_tpu()
    replicas = strategy.num_replicas_in_sync
    global_batch = PER_REPLICA_BATCH * replicas
    print(f"{replicas} replicas, global batch {global_batch}", flush=True)

    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
    steps_per_epoch = len(x_train) // global_batch
    train_ds = strategy.experimental_distribute_dataset(
        make_dataset(x_train, y_train, global_batch, training=True)
    )
    test_ds = strategy.experimental_distribute_dataset(
        make_dataset(x_test, y_test, global_batch, training=False)
    )

    with strategy.scope():
        model = build_model()
        # Linear scaling: the batch grew with the cores, so does the learning rate.
        optimizer = tf.keras.optimizers.Adam(args.learning_rate * replicas)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE
        )
        train_loss = tf.keras.metrics.Mean("train_loss")
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy("train_accuracy")
        test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy("test_accuracy")
        epoch = tf.Variable(0, dtype=tf.int64, trainable=False)

    out = os.environ.get("TPUCTL_OUTPUT_DIR", "outputs")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
    manager = tf.train.CheckpointManager(
        checkpoint, os.path.join(out, "checkpoints"), max_to_keep=3
    )
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
        print(f"resumed from {manager.latest_checkpoint} (epoch {int(epoch.numpy())})")

    @tf.function
    def train_steps(iterator, steps: tf.Tensor) -> None:  # noqa: ANN001
        def step_fn(inputs):  # noqa: ANN001, ANN202
            images, labels = inputs
            with tf.GradientTape() as tape:
                logits = model(images, training=True)
                per_example = loss_fn(labels, logits)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            train_loss.update_state(loss * replicas)
            train_accuracy.update_state(labels, logits)

        for _ in tf.range(steps):
            strategy.run(step_fn, args=(next(iterator),))

    @tf.function
    def test_step(inputs) -> None:  # noqa: ANN001
        def step_fn(batch):  # noqa: ANN001, ANN202
            images, labels = batch
            test_accuracy.update_state(labels, model(images, training=False))

        strategy.run(step_fn, args=(inputs,))

    train_iterator = iter(train_ds)
    steps = tf.constant(STEPS_PER_CALL)
    while int(epoch.numpy()) < args.epochs:
        for _ in range(steps_per_epoch // STEPS_PER_CALL):
            train_steps(train_iterator, steps)
        for batch in test_ds:
            test_step(batch)
        epoch.assign_add(1)
        print(
            f"epoch {int(epoch.numpy())}: loss {train_loss.result():.4f}, "
            f"accuracy {train_accuracy.result():.4f}, test {test_accuracy.result():.4f}",
            flush=True,
        )
        manager.save(checkpoint_number=int(epoch.numpy()))
        for metric in (train_loss, train_accuracy, test_accuracy):
            metric.reset_state()


if __name__ == "__main__":
    main()
