"""JAX on a TPU: every host of a slice joins one program, code does not assume a
device count, and pip installs the TPU build."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tpuctl.services.doctor.context import Context, attr, kwarg, local_devices
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Module

DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
DEVICE_COUNTS = frozenset({"jax.device_count", "jax.local_device_count"})
REQUIREMENT = re.compile(r"^\s*(jax|jaxlib)\s*(\[([^\]]*)\])?", re.IGNORECASE)


def check(ctx: Context) -> Iterator[Finding]:
    modules = ctx.modules_using("jax")
    if not modules:
        return
    acc = ctx.accelerator
    if acc is not None and acc.multi_host and not any(ctx.calls({"jax.distributed.initialize"})):
        module = modules[0]
        line = min(n for name, n in module.imports.items() if name.split(".")[0] == "jax")
        yield Finding(
            module.rel,
            line,
            "warning",
            "jax-distributed",
            f"a {acc.name} has {acc.workers} hosts and jax.distributed.initialize() is never "
            "called: the hosts may not join one computation, and each sees only its own "
            "devices",
            "call jax.distributed.initialize() first thing, before any other JAX call",
        )
    if acc is not None:
        yield from _device_counts(ctx, modules, local_devices(acc), acc.name)
    yield from _requirements(ctx)


def _device_counts(ctx: Context, modules: list[Module], local: int, acc: str) -> Iterator[Finding]:
    for module in modules:
        pmap = any(q in ("jax.pmap", "flax.jax_utils.replicate") for _, q in module.calls)
        for node in ast.walk(module.tree):
            count = _hard_coded(module, node, pmap)
            if count is not None and count != local:
                yield ctx.finding(
                    module,
                    node,
                    "error",
                    "jax-device-count",
                    f"the code assumes {count} local devices; each host of a {acc} has "
                    f"{local}, so pmap over it fails on a shape mismatch",
                    "use jax.local_device_count() instead of the number",
                )


def _hard_coded(module: Module, node: ast.AST, pmap: bool) -> int | None:
    """A device count written as a number: `jax.devices()[:8]`, `device_count() == 8`,
    or, in a module that pmaps, `x.reshape(8, ...)` / `reshape(x, (8, -1))`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        value = node.value
        if isinstance(value, ast.Call) and module.qual(value.func) in DEVICE_LISTS:
            return _int(node.slice.upper)
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        sides = [node.left, node.comparators[0]]
        if any(isinstance(s, ast.Call) and module.qual(s.func) in DEVICE_COUNTS for s in sides):
            return next((v for v in map(_int, sides) if v is not None), None)
    if pmap and isinstance(node, ast.Call) and attr(node) == "reshape" and node.args:
        shape = node.args[1] if module.qual(node.func) and len(node.args) > 1 else node.args[0]
        first = shape.elts[0] if isinstance(shape, ast.Tuple) and shape.elts else shape
        count = _int(first)
        return count if count in (4, 8) else None
    if isinstance(node, ast.Call) and module.qual(node.func) == "jax.pmap":
        return _int(kwarg(node, "axis_size"))
    return None


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _requirements(ctx: Context) -> Iterator[Finding]:
    for path in sorted(ctx.program.root.glob("requirements*.txt")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        if any(line.strip().lower().startswith("libtpu") for line in lines):
            continue
        for number, line in enumerate(lines, 1):
            match = REQUIREMENT.match(line)
            if match and match.group(1).lower() == "jax" and "tpu" not in (match.group(3) or ""):
                yield Finding(
                    path.name,
                    number,
                    "error",
                    "jax-tpu-extra",
                    "jax without the [tpu] extra installs no libtpu: JAX runs on the host "
                    "CPU of the TPU VM, without an error",
                    f"write jax[tpu] (same version: {line.strip().replace('jax', 'jax[tpu]', 1)})",
                )
