"""PyTorch/XLA on a TPU: no CUDA, and a training loop that cuts the lazy graph each step."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tpuctl.services.doctor.context import Context, attr, kwarg
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Module

CUDA = re.compile(r"^cuda(:\d+)?$")
DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_type"})
LOOPS = (ast.For, ast.AsyncFor, ast.While)
# what ends an XLA step: the explicit call, or loaders and contexts that make it
STEP_CALLS = frozenset({"mark_step", "sync"})
STEPPING = frozenset(
    {
        "torch_xla.distributed.parallel_loader.MpDeviceLoader",
        "torch_xla.distributed.parallel_loader.ParallelLoader",
        "torch_xla.step",
    }
)


def check(ctx: Context) -> Iterator[Finding]:
    modules = ctx.modules_using("torch")
    for module in modules:
        yield from _cuda(ctx, module)
    if ctx.program.uses("torch_xla") and not any(ctx.calls(STEPPING)):
        for module in modules:
            yield from _unstepped_loops(ctx, module)


def _cuda(ctx: Context, module: Module) -> Iterator[Finding]:
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call) and attr(node) == "cuda" and module.qual(node.func) is None:
            yield ctx.finding(
                module,
                node,
                "error",
                "xla-cuda",
                ".cuda() needs an NVIDIA GPU: on a TPU VM it raises (no CUDA driver)",
                "use the XLA device: device = torch_xla.device() (or xm.xla_device()), "
                "then .to(device)",
            )
        elif _is_cuda_device(module, node):
            yield ctx.finding(
                module,
                node,
                "error",
                "xla-cuda",
                f"device {node.value!r}: a TPU VM has no CUDA, so this raises or falls "  # type: ignore[attr-defined]
                "back to the CPU, and the TPU stays idle",
                "use the XLA device: device = torch_xla.device() (or xm.xla_device())",
            )


def _is_cuda_device(module: Module, node: ast.AST) -> bool:
    """A "cuda" string given as a device (torch.device, .to, device=, a device variable)."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    if not CUDA.match(node.value):
        return False
    child: ast.AST = node
    for anc in module.ancestors(node):
        if isinstance(anc, ast.IfExp | ast.BoolOp):
            child = anc
            continue
        if isinstance(anc, ast.keyword):
            return anc.arg in DEVICE_KEYWORDS
        if isinstance(anc, ast.Call):
            qual = module.qual(anc.func) or ""
            return child in anc.args and (
                qual in ("torch.device", "torch.autocast") or (not qual and attr(anc) == "to")
            )
        if isinstance(anc, ast.Assign):
            return any(isinstance(t, ast.Name) and "device" in t.id for t in anc.targets)
        return False
    return False


def _calls_in(ctx: Context, module: Module, body: ast.AST, depth: int = 2) -> Iterator[str]:
    """Method names called in `body` and, `depth` levels down, in the program's
    functions it calls."""
    for node in ast.walk(body):
        if isinstance(node, ast.Call):
            name = attr(node) or (node.func.id if isinstance(node.func, ast.Name) else "")
            yield name
            if depth > 0:
                found = ctx.program.target(module, node)
                if found is not None:
                    yield from _calls_in(ctx, found[0], found[1], depth - 1)


def _unstepped_loops(ctx: Context, module: Module) -> Iterator[Finding]:
    for loop in ast.walk(module.tree):
        if not isinstance(loop, LOOPS):
            continue
        called = set(_calls_in(ctx, module, loop))
        if "backward" not in called or called & STEP_CALLS or _barrier_step(loop):
            continue
        inner = [n for n in ast.walk(loop) if isinstance(n, LOOPS) and n is not loop]
        if any("backward" in set(_calls_in(ctx, module, n)) for n in inner):
            continue  # the inner loop is the training loop: judged on its own
        yield ctx.finding(
            module,
            loop,
            "warning",
            "xla-mark-step",
            "this training loop never calls xm.mark_step(): PyTorch/XLA keeps growing one "
            "lazy graph over the steps, so the TPU runs late, recompiles, or runs out of memory",
            "call xm.mark_step() (torch_xla.sync()) at the end of each step, or iterate over "
            "a pl.MpDeviceLoader, which does it for you",
        )


def _barrier_step(loop: ast.AST) -> bool:
    """`xm.optimizer_step(optimizer, barrier=True)` ends the step too."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and attr(node) == "optimizer_step":
            barrier = kwarg(node, "barrier", 2)
            if isinstance(barrier, ast.Constant) and barrier.value is True:
                return True
    return False
