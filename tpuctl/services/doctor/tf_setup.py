"""TensorFlow on a TPU, the setup: connect and initialize the TPU system, a
`TPUStrategy`, the model, optimizer and metrics built in its scope, and the training
step compiled with `tf.function`. The order is the one of the Cloud TPU guide:

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
    with strategy.scope():
        model = ...; optimizer = ...; metrics = ...
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tpuctl.services.doctor.context import Context, attr
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import FUNCS, Func, Module

TPU_STRATEGY = frozenset(
    {"tensorflow.distribute.TPUStrategy", "tensorflow.distribute.experimental.TPUStrategy"}
)
GPU_STRATEGIES = frozenset(
    {
        "tensorflow.distribute.MirroredStrategy",
        "tensorflow.distribute.OneDeviceStrategy",
        "tensorflow.distribute.MultiWorkerMirroredStrategy",
        "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
        "tensorflow.distribute.experimental.CentralStorageStrategy",
    }
)
CONNECT = frozenset({"tensorflow.config.experimental_connect_to_cluster"})
INITIALIZE = frozenset({"tensorflow.tpu.experimental.initialize_tpu_system"})
MODELS = frozenset(
    {
        "tensorflow.keras.Sequential",
        "tensorflow.keras.Model",
        "tensorflow.keras.models.Sequential",
        "tensorflow.keras.models.Model",
        "tensorflow.keras.models.load_model",
        "tensorflow.keras.models.clone_model",
    }
)
# Keras wraps these methods of a Model in a tf.function itself.
KERAS_STEPS = frozenset({"train_step", "test_step", "predict_step"})


def check(ctx: Context) -> Iterator[Finding]:
    if not ctx.program.uses("tensorflow"):
        return
    tpu = list(ctx.calls(TPU_STRATEGY))
    gpu = list(ctx.calls(GPU_STRATEGIES))
    created = list(_creations(ctx))
    if tpu:
        yield from _initialization(ctx, tpu)
        yield from _outside_scope(ctx, created)
    else:
        for module, call in gpu:
            name = (module.qual(call.func) or "").rpartition(".")[2]
            yield ctx.finding(
                module,
                call,
                "error",
                "tf-gpu-strategy",
                f"{name} is for GPUs: on a TPU VM it finds no GPU and trains on the host CPU, "
                "without an error",
                "create a tf.distribute.TPUStrategy after connecting to and initializing the "
                "TPU system (docs/doctor.md shows the four lines)",
            )
        if not gpu and created:
            module, call, kind = created[0]
            yield ctx.finding(
                module,
                call,
                "error",
                "tf-no-strategy",
                f"a Keras {kind} is created with no distribution strategy: TensorFlow uses "
                "the host CPU of the TPU VM and never the TPU",
                "create a tf.distribute.TPUStrategy and build the model, optimizer and "
                "metrics in `with strategy.scope():`",
            )
    yield from _eager_steps(ctx)


def global_batch(ctx: Context) -> bool:
    """Is a batch of the program TPUStrategy's global batch, split over the cores? With a
    TPUStrategy, and where tf-gpu-strategy or tf-no-strategy tell to create one (a GPU
    strategy, or a Keras model with none): the batch is global once the fix is in. Not
    in a program that only reads data with tf.data (a JAX input pipeline)."""
    return any(ctx.calls(TPU_STRATEGY | GPU_STRATEGIES)) or any(_creations(ctx))


def _initialization(ctx: Context, strategies: list[tuple[Module, ast.Call]]) -> Iterator[Finding]:
    inits = list(ctx.calls(INITIALIZE))
    connects = list(ctx.calls(CONNECT))
    first_module, first = strategies[0]
    multi_host = ctx.accelerator is not None and ctx.accelerator.multi_host
    if not inits:
        yield ctx.finding(
            first_module,
            first,
            "error",
            "tf-init-missing",
            "TPUStrategy is created but the TPU system is never initialized: TensorFlow "
            'stops with "Cannot find TPU device" (or finds no TPU devices)',
            "before creating the strategy: tf.tpu.experimental.initialize_tpu_system(resolver)",
        )
    if not connects:
        where = (
            "on a multi-host slice each worker sees only its own chips"
            if multi_host
            else ("needed on multi-host slices (harmless on one host)")
        )
        yield ctx.finding(
            first_module,
            first,
            "error" if multi_host else "hint",
            "tf-init-missing",
            f"no tf.config.experimental_connect_to_cluster(resolver) before the TPU is "
            f"initialized: {where}",
            "call tf.config.experimental_connect_to_cluster(resolver) right after creating "
            "the TPUClusterResolver",
        )
    for module, init in inits:
        for smod, strategy in strategies:
            if _before(module, strategy, init, smod):
                yield ctx.finding(
                    module,
                    init,
                    "error",
                    "tf-init-order",
                    f"the TPU system is initialized after TPUStrategy is created (line "
                    f"{strategy.lineno}): the strategy saw no initialized TPU",
                    "initialize the TPU system first, then create the TPUStrategy",
                )
        for cmod, connect in connects:
            if _before(cmod, init, connect, module):
                yield ctx.finding(
                    cmod,
                    connect,
                    "error",
                    "tf-init-order",
                    f"connect_to_cluster comes after initialize_tpu_system (line "
                    f"{init.lineno}): the TPU system was initialized before TensorFlow "
                    "connected to the cluster",
                    "resolver, then connect_to_cluster, then initialize_tpu_system",
                )
        if ctx.in_loop(module, init):
            yield ctx.finding(
                module,
                init,
                "error",
                "tf-init-repeated",
                "initialize_tpu_system runs in a loop: each call wipes the TPU's memory, "
                "so variables and compiled programs from before are gone",
                "initialize the TPU system once, at start-up, outside any loop",
            )
    for module, init in inits[1:]:
        yield ctx.finding(
            module,
            init,
            "warning",
            "tf-init-repeated",
            f"initialize_tpu_system is called more than once (first at {inits[0][0].rel}:"
            f"{inits[0][1].lineno}): a second call wipes the TPU's memory",
            "initialize once, before the strategy is created, and pass the strategy around",
        )


def _before(mod_a: Module, a: ast.AST, b: ast.AST, mod_b: Module) -> bool:
    """`a` runs before `b`: both in one function body (or both at module level)."""
    same = mod_a is mod_b and mod_a.owner(a) is mod_b.owner(b)
    return same and getattr(a, "lineno", 0) < getattr(b, "lineno", 0)


def _creations(ctx: Context) -> Iterator[tuple[Module, ast.Call, str]]:
    """Calls that create Keras models, optimizers and metrics (they own variables)."""
    model_classes = _model_classes(ctx)
    for module in ctx.modules_using("tensorflow"):
        for call, qual in module.calls:
            kind = _kind(qual)
            names = model_classes.get(module, set())
            if kind is None and isinstance(call.func, ast.Name) and call.func.id in names:
                kind = "model"
            if kind:
                yield module, call, kind


def _kind(qual: str | None) -> str | None:
    if not qual or not qual.startswith("tensorflow.keras."):
        return None
    last = qual.rpartition(".")[2]
    if qual in MODELS or (qual.startswith("tensorflow.keras.applications.") and last[:1].isupper()):
        return "model"
    if not last[:1].isupper() or ".schedules." in qual:
        return None  # functions (metrics.mae) and learning-rate schedules own no variables
    if qual.startswith("tensorflow.keras.optimizers."):
        return "optimizer"
    if qual.startswith("tensorflow.keras.metrics."):
        return "metric"
    return None


def _model_classes(ctx: Context) -> dict[Module, set[str]]:
    """Names, per module, of the program's subclasses of keras.Model (as called there)."""
    found: dict[Module, set[str]] = {}
    for module in ctx.program.modules:
        names: set[str] = set()
        changed = True
        while changed:  # subclasses of subclasses, in any order
            changed = False
            for cls in module.classes.values():
                if cls.name in names:
                    continue
                for base in cls.bases:
                    qual = module.qual(base)
                    if qual in MODELS or (isinstance(base, ast.Name) and base.id in names):
                        names.add(cls.name)
                        changed = True
        found[module] = names
    for module in ctx.program.modules:  # imported from another module of the program
        for local, dotted in module.aliases.items():
            mod_name, _, name = dotted.rpartition(".")
            other = ctx.program.by_name.get(mod_name)
            if other is not None and name in found.get(other, set()):
                found.setdefault(module, set()).add(local)
    return found


def _in_scope(module: Module, node: ast.AST) -> bool:
    """Lexically inside `with <anything>.scope():` in its own function."""
    for anc in module.ancestors(node):
        if isinstance(anc, FUNCS):
            return False
        if isinstance(anc, ast.With | ast.AsyncWith):
            for item in anc.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and attr(expr) == "scope":
                    return True
    return False


def _outside_scope(ctx: Context, created: list[tuple[Module, ast.Call, str]]) -> Iterator[Finding]:
    reached = ctx.program.reached_outside(_in_scope)
    for module, call, kind in created:
        owner = module.owner(call)
        if _in_scope(module, call) or (owner is not None and owner not in reached):
            continue
        yield ctx.finding(
            module,
            call,
            "error",
            "tf-outside-scope",
            f"a Keras {kind} is created outside strategy.scope(): its variables live on "
            "the host CPU, so it trains there (or fails when the TPU step uses it), "
            "without the TPU",
            "create the model, optimizer and metrics inside `with strategy.scope():`",
        )


def _is_graph(module: Module, func: Func) -> bool:
    """Decorated with tf.function, wrapped in one, or a Keras step method."""
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if module.qual(target) == "tensorflow.function":
            return True
    if func.name in KERAS_STEPS and module.enclosing_class(func) is not None:
        return True
    for call, qual in module.calls:  # step = tf.function(step)
        if qual == "tensorflow.function" and call.args:
            arg = call.args[0]
            if isinstance(arg, ast.Name) and arg.id == func.name:
                return True
    return False


def _in_graph(module: Module, node: ast.AST) -> bool:
    chain = [node, *module.ancestors(node)]
    return any(isinstance(n, FUNCS) and _is_graph(module, n) for n in chain)


def _step_calls(module: Module) -> dict[Func | None, ast.Call]:
    """Per function, the first call that makes it a training step: GradientTape, or
    `strategy.run`."""
    found: dict[Func | None, ast.Call] = {}
    for call, qual in module.calls:
        is_step = qual == "tensorflow.GradientTape"
        if attr(call) in ("run", "experimental_run_v2") and isinstance(call.func, ast.Attribute):
            receiver = call.func.value
            name = (
                receiver.id
                if isinstance(receiver, ast.Name)
                else (receiver.attr if isinstance(receiver, ast.Attribute) else "")
            )
            is_step = is_step or "strategy" in name.lower()
        if is_step:
            found.setdefault(module.owner(call), call)
    return found


def _eager_steps(ctx: Context) -> Iterator[Finding]:
    eager: set[Func] | None = None
    flagged: set[ast.AST | None] = set()
    for module in ctx.modules_using("tensorflow"):
        steps = sorted(_step_calls(module).items(), key=lambda fc: fc[0].lineno if fc[0] else 0)
        for func, call in steps:
            if _in_graph(module, call):
                continue
            if func is not None:
                if eager is None:
                    eager = ctx.program.reached_outside(_in_graph)
                if func not in eager:
                    continue  # never called eagerly that we can see
            if func is not None and any(a in flagged for a in module.ancestors(func)):
                continue  # its enclosing step is reported; one decorator fixes both
            flagged.add(func)
            where = f"`{func.name}`" if func else "module-level code"
            yield ctx.finding(
                module,
                func or call,
                "warning",
                "tf-function",
                f"{where} runs a custom training step (GradientTape or strategy.run) "
                "eagerly: each op goes to the TPU one at a time and strategy.run retraces "
                "on every call",
                "decorate the step with @tf.function (what it calls is compiled with it)",
            )
