"""What every check family gets: the program, its values and the accelerator asked for."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from tpuctl.catalog import SliceShape
from tpuctl.services.doctor.findings import Finding, Severity
from tpuctl.services.doctor.program import FUNCS, Module, Program
from tpuctl.services.doctor.values import Values


def replicas(acc: SliceShape) -> int:
    """Devices a framework sees on the slice: TensorCores on v2/v3, chips from v4 on
    (v4 and v5p chips are one megacore device; v5e and v6e chips have one core)."""
    return acc.cores if acc.generation in ("v2", "v3") else acc.chips


def local_devices(acc: SliceShape) -> int:
    """Devices one worker VM sees (`jax.local_device_count()`)."""
    return replicas(acc) // acc.workers


def attr(call: ast.Call) -> str | None:
    """`x.batch(...)` -> `batch`."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def kwarg(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def tokens(name: str) -> set[str]:
    """`val_ds` -> {"val", "ds"}; `trainDataset` -> {"train", "dataset"}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return {t for t in spaced.lower().split("_") if t}


@dataclass
class Context:
    program: Program
    accelerator: SliceShape | None

    @cached_property
    def values(self) -> Values:
        return Values(self.program)

    def finding(
        self, module: Module, node: ast.AST, severity: Severity, check: str, message: str, fix: str
    ) -> Finding:
        line = getattr(node, "lineno", 1)
        return Finding(module.rel, line, severity, check, message, fix)

    def calls(
        self, names: Iterable[str], modules: Iterable[Module] | None = None
    ) -> Iterator[tuple[Module, ast.Call]]:
        """Calls of the given dotted names (`tensorflow.distribute.TPUStrategy`)."""
        wanted = set(names)
        return self._select(modules, lambda call, qual: qual in wanted)

    def method_calls(
        self, names: Iterable[str], modules: Iterable[Module] | None = None
    ) -> Iterator[tuple[Module, ast.Call]]:
        """Calls `x.name(...)` on something that is not an imported module."""
        wanted = set(names)
        return self._select(modules, lambda call, qual: qual is None and attr(call) in wanted)

    def _select(
        self,
        modules: Iterable[Module] | None,
        keep: Callable[[ast.Call, str | None], bool],
    ) -> Iterator[tuple[Module, ast.Call]]:
        for module in self.program.modules if modules is None else modules:
            yield from ((module, call) for call, qual in module.calls if keep(call, qual))

    def modules_using(self, prefix: str) -> list[Module]:
        return [m for m in self.program.modules if m.uses(prefix)]

    def in_loop(self, module: Module, node: ast.AST) -> bool:
        """Inside a `for`/`while` loop or a comprehension of its own function."""
        loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.GeneratorExp)
        for anc in module.ancestors(node):
            if isinstance(anc, FUNCS):
                return False
            if isinstance(anc, loops):
                return True
        return False
