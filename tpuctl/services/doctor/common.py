"""Checks for every framework: outputs written where they vanish with the node, data
read from the laptop's disk, and code left over from GPUs."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tpuctl.services.doctor.context import Context, attr, kwarg
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Module

FRAMEWORKS = ("tensorflow", "jax", "flax", "torch", "torch_xla", "orbax")
# dotted name -> (position, keyword) of the path it writes
SAVERS: dict[str, tuple[int, str]] = {
    "tensorflow.saved_model.save": (1, "export_dir"),
    "tensorflow.keras.models.save_model": (1, "filepath"),
    "tensorflow.keras.callbacks.ModelCheckpoint": (0, "filepath"),
    "tensorflow.keras.callbacks.BackupAndRestore": (0, "backup_dir"),
    "tensorflow.train.CheckpointManager": (1, "directory"),
    "torch.save": (1, "f"),
    "torch_xla.core.xla_model.save": (1, "file_or_path"),
    "flax.training.checkpoints.save_checkpoint": (0, "ckpt_dir"),
    "orbax.checkpoint.CheckpointManager": (0, "directory"),
}
SAVE_METHODS = frozenset({"save", "save_weights"})  # model.save(path), checkpoint.save(path)
READERS: dict[str, tuple[int, str]] = {
    "tensorflow.data.TFRecordDataset": (0, "filenames"),
    "tensorflow.data.TextLineDataset": (0, "filenames"),
    "tensorflow.data.Dataset.list_files": (0, "file_pattern"),
    "tensorflow.io.gfile.glob": (0, "pattern"),
    "tensorflow.keras.utils.image_dataset_from_directory": (0, "directory"),
    "tensorflow_datasets.load": (99, "data_dir"),
    "numpy.load": (0, "file"),
    "numpy.loadtxt": (0, "fname"),
    "pandas.read_csv": (0, "filepath_or_buffer"),
    "pandas.read_parquet": (0, "path"),
    "torch.load": (0, "f"),
    "glob.glob": (0, "pathname"),
}
TF_DEVICE = frozenset({"tensorflow.device", "tensorflow.compat.v1.device"})
GPU_DEVICE = re.compile(r"(^|/|:)gpu(:|$)", re.IGNORECASE)  # /gpu:0, /device:GPU:1, GPU
LAPTOP = re.compile(r"^(/Users/|/home/|~|[A-Za-z]:[\\/])")


def check(ctx: Context) -> Iterator[Finding]:
    if any(ctx.program.uses(f) for f in FRAMEWORKS):
        yield from _local_outputs(ctx)
    yield from _laptop_inputs(ctx)
    yield from _gpu_leftovers(ctx)


def _path_arg(call: ast.Call, where: tuple[int, str]) -> ast.expr | None:
    return kwarg(call, where[1], where[0])


def _local_outputs(ctx: Context) -> Iterator[Finding]:
    writes: list[tuple[Module, ast.Call, ast.expr | None]] = []
    for module in ctx.program.modules:
        for call, qual in module.calls:
            if qual in SAVERS:
                writes.append((module, call, _path_arg(call, SAVERS[qual])))
            elif qual is None and attr(call) in SAVE_METHODS:
                writes.append((module, call, kwarg(call, "filepath", 0)))
    for module, call, arg in writes:
        path = ctx.values.string(module, arg) if arg is not None else None
        if path is None or path.startswith("gs://"):
            continue
        yield ctx.finding(
            module,
            call,
            "warning",
            "io-local-checkpoint",
            f"a checkpoint or model is written to the local path {path!r}, which is deleted "
            "with the node when the job ends",
            "write under os.environ['TPUCTL_OUTPUT_DIR'] (tpuctl uploads it to the job's "
            "bucket as it goes and restores it after a preemption) or to a gs:// path",
        )


def _laptop_inputs(ctx: Context) -> Iterator[Finding]:
    root = ctx.program.root
    for module in ctx.program.modules:
        for call, qual in module.calls:
            if qual in READERS:
                arg = _path_arg(call, READERS[qual])
            elif isinstance(call.func, ast.Name) and call.func.id == "open" and call.args:
                mode = kwarg(call, "mode", 1)
                writing = isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")
                arg = None if writing else call.args[0]
            else:
                continue
            path = ctx.values.string(module, arg) if arg is not None else None
            if path is None or not LAPTOP.match(path):
                continue
            inside = Path(path).expanduser().is_relative_to(root)
            fix = (
                "it is in the work dir: use a path relative to the script, "
                "e.g. Path(__file__).parent / ..."
                if inside
                else "put the data in a gs:// bucket (or in the work dir, if it is small) and "
                "read it from there"
            )
            yield ctx.finding(
                module,
                call,
                "warning",
                "io-local-data",
                f"data is read from {path!r}, a path on this computer: the TPU VM has no such file",
                fix,
            )


def _gpu_leftovers(ctx: Context) -> Iterator[Finding]:
    growth = "tensorflow.config.experimental.set_memory_growth"
    for module, call in ctx.calls({growth, "tensorflow.config.set_memory_growth"}):
        yield ctx.finding(
            module,
            call,
            "warning",
            "gpu-memory-growth",
            "set_memory_growth is for GPUs: a TPU VM has none (indexing its GPU list "
            "raises IndexError)",
            "remove the GPU memory set-up; TPU memory needs none",
        )
    for module, call in ctx.calls(TF_DEVICE):
        name = call.args[0] if call.args else kwarg(call, "device_name")
        if isinstance(name, ast.Constant) and GPU_DEVICE.search(str(name.value)):
            yield ctx.finding(
                module,
                call,
                "warning",
                "gpu-device",
                f"tf.device({name.value!r}) names a GPU: a TPU VM has none, so its ops run "
                "on the CPU (soft placement) or fail",
                "remove the tf.device block: TPUStrategy places the model's ops on the TPU "
                "(build it in strategy.scope())",
            )
    for module in ctx.program.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield from _gpu_string(ctx, module, node, node.value)


def _gpu_string(ctx: Context, module: Module, node: ast.Constant, text: str) -> Iterator[Finding]:
    in_call = any(isinstance(a, ast.Call) for a in module.ancestors(node))
    if text == "CUDA_VISIBLE_DEVICES":
        yield ctx.finding(
            module,
            node,
            "warning",
            "gpu-cuda-env",
            "CUDA_VISIBLE_DEVICES selects GPUs: on a TPU VM it selects nothing",
            "remove it; every process on a worker sees that worker's TPU chips",
        )
    elif in_call and (text == "nvidia-smi" or text.startswith("nvidia-smi ")):
        yield ctx.finding(
            module,
            node,
            "warning",
            "gpu-nvidia-smi",
            "nvidia-smi does not exist on a TPU VM: the command fails",
            "drop it; to see the TPU devices use jax.devices() or "
            "tf.config.list_logical_devices('TPU')",
        )
    elif in_call and text == "mixed_float16":
        yield ctx.finding(
            module,
            node,
            "warning",
            "gpu-mixed-float16",
            "mixed_float16 is the GPU policy: TPUs compute in bfloat16, and float16 is slow "
            "or unsupported there",
            "use the 'mixed_bfloat16' policy (it needs no loss scaling)",
        )
