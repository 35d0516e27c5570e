"""TensorFlow on a TPU, the input: static batch shapes, a global batch that splits
evenly over the slice's cores, an input pipeline that keeps the TPU busy, and epochs
that end."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tpuctl.services.doctor.context import Context, attr, kwarg, replicas, tokens
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Func, Module
from tpuctl.services.doctor.tf_setup import global_batch

SOURCES = ("tensorflow.data.", "tensorflow_datasets.", "tensorflow.keras.utils.")
METHODS = frozenset(
    {
        "batch",
        "padded_batch",
        "shuffle",
        "repeat",
        "prefetch",
        "interleave",
        "cache",
        "unbatch",
        "with_options",
        "from_tensor_slices",
        "from_tensors",
        "from_generator",
        "list_files",
        "flat_map",
        "rebatch",
        "shard",
    }
)
DATASET_NAMES = frozenset({"ds", "dataset", "datasets"})
# Keras evaluates and predicts partial batches on a TPU itself: only training needs
# drop_remainder, and a pipeline named for evaluation is left alone.
EVAL_WORDS = frozenset(
    {"eval", "evaluation", "val", "valid", "validation", "test", "predict", "inference", "dev"}
)
PY_FUNCTIONS = frozenset(
    {"tensorflow.py_function", "tensorflow.numpy_function", "tensorflow.compat.v1.py_func"}
)
PER_CORE = re.compile(r"per_?(replica|core|device|gpu|chip|tpu)", re.IGNORECASE)
PER_REPLICA_SOURCES = frozenset(
    {"distribute_datasets_from_function", "experimental_distribute_datasets_from_function"}
)


def check(ctx: Context) -> Iterator[Finding]:
    modules = ctx.modules_using("tensorflow")
    if not modules:
        return
    batches = list(ctx.method_calls({"batch", "padded_batch"}, modules))
    train_batches = [(m, c) for m, c in batches if not _for_evaluation(ctx, m, c)]
    for module, call in train_batches:
        position = 3 if attr(call) == "padded_batch" else 1
        drop = kwarg(call, "drop_remainder", position)
        if drop is None or (isinstance(drop, ast.Constant) and drop.value is False):
            yield ctx.finding(
                module,
                call,
                "warning",
                "tf-drop-remainder",
                "the training dataset is batched without drop_remainder=True: the last, "
                "smaller batch has another shape, which the TPU compiles again (or which "
                "fails in a custom step)",
                "batch(global_batch_size, drop_remainder=True)",
            )
    if train_batches and not any(ctx.method_calls({"prefetch"}, modules)):
        module, call = train_batches[0]
        yield ctx.finding(
            module,
            call,
            "warning",
            "tf-prefetch",
            "the input pipeline has no prefetch: the TPU waits for each batch to be "
            "prepared on the host",
            "end the pipeline with .prefetch(tf.data.AUTOTUNE)",
        )
    yield from _batch_sizes(ctx, batches)
    yield from _maps(ctx, modules)
    yield from _endless_epochs(ctx, modules)


def is_dataset(ctx: Context, module: Module, expr: ast.AST) -> bool:
    """Whether `expr` is a tf.data pipeline, from how it was built or its name."""
    if isinstance(expr, ast.Name) and tokens(expr.id) & DATASET_NAMES:
        return True
    for mod, call in ctx.values.chain(module, expr):
        qual = mod.qual(call.func) or ""
        if qual.startswith(SOURCES) or (qual == "" and attr(call) in METHODS):
            return True
    return False


def _for_evaluation(ctx: Context, module: Module, call: ast.Call) -> bool:
    """Named for evaluation: the variable it goes into, its function, a tfds split."""
    names: set[str] = set()
    for anc in module.ancestors(call):
        if isinstance(anc, ast.Assign):
            names |= {t.id for t in anc.targets if isinstance(t, ast.Name)}
        if isinstance(anc, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(anc.name)
            break
    if any(tokens(n) & EVAL_WORDS for n in names):
        return True
    for mod, link in ctx.values.chain(module, call):
        split = kwarg(link, "split")
        if split is not None:
            value = ctx.values.string(mod, split) or ""
            if value.split("[")[0] in ("test", "validation", "val", "eval"):
                return True
    return False


def _per_replica_functions(ctx: Context) -> set[Func]:
    """Functions passed to distribute_datasets_from_function: they batch per replica."""
    found: set[Func] = set()
    for module, call in ctx.method_calls(PER_REPLICA_SOURCES):
        if call.args:
            target = ctx.program.target(module, call.args[0])
            if target is not None:
                found.add(target[1])
    return found


# Below this many examples a core per step, a TPU is mostly idle: Google's guides size the
# global batch as per-core batch x cores, starting near 128 per core
# (https://cloud.google.com/tpu/docs/performance-guide, "Batch size").
SMALL_PER_CORE = 64


def _batch_sizes(ctx: Context, batches: list[tuple[Module, ast.Call]]) -> Iterator[Finding]:
    acc = ctx.accelerator
    if acc is None or not global_batch(ctx):
        return  # no TPUStrategy, nor a finding that asks for one: not a global batch
    n = replicas(acc)
    per_replica = _per_replica_functions(ctx)
    sized = [(m, c, kwarg(c, "batch_size", 0)) for m, c in batches]
    sized += [(m, c, kwarg(c, "batch_size")) for m, c in ctx.method_calls({"fit"})]
    for module, call, size in sized:
        if size is None or module.owner(call) in per_replica:
            continue
        known = ctx.values.integer(module, size)
        if known is None or not isinstance(known.value, int) or known.value <= 0:
            continue
        batch = known.value
        per_core = next((name for name in known.names if PER_CORE.search(name)), None)
        if per_core:
            yield ctx.finding(
                module,
                call,
                "warning",
                "tf-batch-per-core",
                f"the batch is {per_core} = {batch}, a per-core size, where TPUStrategy "
                f"expects the global batch: it splits it over the {n} cores of a {acc.name}, "
                f"so each core gets {batch // n or 'less than 1'}",
                f"batch by the global size, {n} x {batch} = {n * batch} on a {acc.name}: "
                f"{per_core} * strategy.num_replicas_in_sync",
            )
        elif batch % n:
            up = -(-batch // n) * n
            yield ctx.finding(
                module,
                call,
                "error",
                "tf-batch-replicas",
                f"the global batch {batch} is not a multiple of the {n} cores of a "
                f"{acc.name}: the cores would get batches of different shapes, which one "
                "compiled TPU program cannot take",
                f"use a multiple of {n}, e.g. {up} (or {n} x {batch} = {n * batch} if "
                f"{batch} was meant per core)",
            )
        elif batch // n < SMALL_PER_CORE:
            yield ctx.finding(
                module,
                call,
                "hint",
                "tf-batch-small",
                f"the global batch {batch} gives each of the {n} cores of a {acc.name} "
                f"{batch // n} examples a step: a TPU core's matrix units sit mostly idle on "
                "so few (a GPU script's batch, carried over?)",
                f"size the global batch as per-core batch x cores, starting near 128 per "
                f"core: {n} x 128 = {n * 128} on a {acc.name} (scale the learning rate with it)",
            )


def _maps(ctx: Context, modules: list[Module]) -> Iterator[Finding]:
    for module, call in ctx.method_calls({"map"}, modules):
        if not call.args or not is_dataset(ctx, module, call.func.value):  # type: ignore[attr-defined]
            continue
        py = _python_call(ctx, module, call.args[0])
        if py is not None:
            yield ctx.finding(
                module,
                call,
                "warning",
                "tf-map-py-function",
                f"dataset.map runs {py}: Python in the input pipeline holds the GIL, runs "
                "one element at a time and starves the TPU",
                "write the transformation with TensorFlow ops (tf.image, tf.strings, ...) or "
                "preprocess the data once, before training",
            )
        if kwarg(call, "num_parallel_calls", 1) is None:
            yield ctx.finding(
                module,
                call,
                "hint",
                "tf-map-parallel",
                "dataset.map without num_parallel_calls transforms one element at a time on "
                "one host core",
                "map(fn, num_parallel_calls=tf.data.AUTOTUNE)",
            )


def _python_call(ctx: Context, module: Module, fn: ast.AST, depth: int = 3) -> str | None:
    """The tf.py_function/numpy_function that `fn` calls, directly or in what it calls."""
    body: ast.AST | None = fn if isinstance(fn, ast.Lambda) else None
    if body is None:
        found = ctx.program.target(module, fn)
        if found is None:
            return None
        module, body = found
    for node in ast.walk(body):
        if not isinstance(node, ast.Call):
            continue
        qual = module.qual(node.func)
        if qual in PY_FUNCTIONS:
            return qual.replace("tensorflow.", "tf.", 1)
        if depth > 1 and qual is None and node is not fn:
            inner = _python_call(ctx, module, node.func, depth - 1)
            if inner:
                return inner
    return None


def _endless_epochs(ctx: Context, modules: list[Module]) -> Iterator[Finding]:
    wanted = {"fit": "steps_per_epoch", "evaluate": "steps"}
    # a class of the program's own with a fit/evaluate method: its API, not Keras'
    own = {
        stmt.name
        for m in ctx.program.modules
        for node in ast.walk(m.tree)
        if isinstance(node, ast.ClassDef)
        for stmt in node.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    for module, call in ctx.method_calls(set(wanted) - own, modules):
        pairs = [(kwarg(call, "x", 0), wanted[attr(call) or ""])]
        if attr(call) == "fit":
            pairs.append((kwarg(call, "validation_data"), "validation_steps"))
        for data, steps in pairs:
            if data is None or kwarg(call, steps) is not None:
                continue
            if _repeats_forever(ctx, module, data):
                yield ctx.finding(
                    module,
                    call,
                    "error",
                    "tf-repeat-steps",
                    f"{attr(call)}() gets a dataset that repeat()s forever and no {steps}: "
                    "the first epoch never ends, and the TPU bills until the job is killed",
                    f"pass {steps}=<number of batches>, or drop the repeat()",
                )


def _repeats_forever(ctx: Context, module: Module, data: ast.AST) -> bool:
    endless = finite = False
    for _, call in ctx.values.chain(module, data):
        if attr(call) == "repeat":
            count = kwarg(call, "count", 0)
            if count is None or (isinstance(count, ast.Constant) and count.value in (None, -1)):
                endless = True
        elif attr(call) == "take" and call.args:
            finite = True
    return endless and not finite
