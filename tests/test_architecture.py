"""The layers go one way, and nothing leans on a lazy import to dodge a cycle.

The import graph of tpuctl/ is read from the source: every import counts, at the top
of a module, inside a function, or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tpuctl"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name `source` (the text of `module`) imports, relative imports
    resolved against `module`'s package (`from ..cli import x` in tpuctl.cloud.tpu is
    tpuctl.cli.x, or tpuctl.cli when x is not a module)."""
    names: set[str] = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            for alias in node.names:
                sub = f"{parent}.{alias.name}"
                names.add(sub if sub in MODULES else parent)
    return names


def _imports(name: str, path: Path) -> set[str]:
    return imports_of(path.read_text(), name, path.name == "__init__.py")


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _internal(name: str) -> set[str]:
    return {m for m in GRAPH[name] if m in MODULES and m != name}


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_import_graph_has_no_cycle() -> None:
    # Tarjan's strongly connected components: any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in _internal(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert cycles == []


Graph = dict[str, set[str]]


def _violations(rule: Callable[[str, str], bool], graph: Graph | None = None) -> list[str]:
    graph = GRAPH if graph is None else graph
    return sorted(f"{src} imports {dst}" for src in graph for dst in graph[src] if rule(src, dst))


def cli_below(src: str, dst: str) -> bool:
    """services or cloud reaching up into the CLI."""
    below_cli = _in(src, "tpuctl.services") or _in(src, "tpuctl.cloud")
    return below_cli and _in(dst, "tpuctl.cli")


def services_below(src: str, dst: str) -> bool:
    """a cloud adapter reaching up into the services."""
    return _in(src, "tpuctl.cloud") and _in(dst, "tpuctl.services")


def emulator_imported(src: str, dst: str) -> bool:
    """the emulator imported by anything but `tpuctl emulator`."""
    allowed = _in(src, "tpuctl.emulator") or src == "tpuctl.cli.emulator_cmd"
    return _in(dst, "tpuctl.emulator") and not allowed


def google_outside_cloud(src: str, dst: str) -> bool:
    """google.* or asyncssh outside the cloud adapters and the emulator."""
    allowed = _in(src, "tpuctl.cloud") or _in(src, "tpuctl.emulator")
    return (dst.split(".")[0] in ("google", "asyncssh")) and not allowed


_AGENT_SIBLINGS = {p.stem for p in (PACKAGE / "agent").glob("*.py")}


def agent_outside_stdlib(src: str, dst: str) -> bool:
    """the agent importing anything but the standard library and itself."""
    if not _in(src, "tpuctl.agent"):
        return False
    top = dst.split(".")[0]
    own = _in(dst, "tpuctl.agent") or top in _AGENT_SIBLINGS
    return not own and top not in sys.stdlib_module_names and top != "__future__"


RULES = [cli_below, services_below, emulator_imported, google_outside_cloud, agent_outside_stdlib]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_no_import_breaks_the_rule(rule: Callable[[str, str], bool]) -> None:
    assert _violations(rule) == []


def test_outside_the_agent_only_its_protocol_bundle_and_labels_are_imported() -> None:
    """The laptop shares the job protocol with the agent (its claims and leases too, and how
    an environment is keyed), ships its bundle and takes its label names; the rest of the
    agent (HTTP, token, Storage client) is the VM's. The emulator, which hosts emulated
    workers, is a wing of its own."""
    shared = {"tpuctl.agent.protocol", "tpuctl.agent.claims", "tpuctl.agent.bundle",
              "tpuctl.agent.labels", "tpuctl.agent.envkeys"}  # fmt: skip

    def wrong(src: str, dst: str) -> bool:
        outside = not _in(src, "tpuctl.agent") and not _in(src, "tpuctl.emulator")
        return outside and _in(dst, "tpuctl.agent") and dst not in shared

    assert _violations(wrong) == []


def test_the_rules_see_a_violation() -> None:
    """The graph is real: known edges are in it (a parser that saw nothing would pass)."""
    assert "tpuctl.services.nodes" in GRAPH["tpuctl.services.run.provision"]
    assert "tpuctl.cloud.tpu" in GRAPH["tpuctl.cloud.clients"]  # a lazy import counts
    assert "tpuctl.cloud.backend" in GRAPH["tpuctl.services.nodes"]  # so does TYPE_CHECKING
    assert "tpuctl.agent.protocol" in GRAPH["tpuctl.agent.transfer"]  # and a relative one


# A module written to break each rule with a relative import, as the rules must see it.
_RELATIVE_BREAKS = [
    (cli_below, "tpuctl.cloud.tpu", False, "from ..cli import render"),
    (cli_below, "tpuctl.services.run.spec", False, "from ...cli.render import table"),
    (services_below, "tpuctl.cloud.storage", False, "from ..services import staging"),
    (emulator_imported, "tpuctl.services.nodes", False, "from ..emulator.backend import Backend"),
    (emulator_imported, "tpuctl.cli", True, "from ..emulator import daemon"),
    (agent_outside_stdlib, "tpuctl.agent.job", False, "from ..services import jobs"),
    (agent_outside_stdlib, "tpuctl.agent", True, "from .. import catalog"),
]


@pytest.mark.parametrize(("rule", "module", "is_package", "source"), _RELATIVE_BREAKS)
def test_a_relative_import_across_a_layer_fails_the_rule(
    rule: Callable[[str, str], bool], module: str, is_package: bool, source: str
) -> None:
    graph = {module: imports_of(source, module, is_package)}
    assert len(_violations(rule, graph)) == 1, graph
    # and the same module importing within its own layer breaks nothing
    same = {module: imports_of("from . import errors", module, is_package)}
    assert _violations(rule, same) == []


# The TPU API's request and answer keys: the adapter's business (cloud/tpu_wire.py).
WIRE_KEYS = ("acceleratorType", "schedulingConfig", "networkConfig", "queuedResource",
             "multisliceParams", "nodeSpec", "queueingPolicy")  # fmt: skip


def _wire_keys_in(source: str) -> list[str]:
    """Every wire key written as a string literal in `source`."""
    return sorted(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in WIRE_KEYS
    )


def test_services_build_and_read_no_request_body() -> None:
    found = {
        name: keys
        for name, path in MODULES.items()
        if _in(name, "tpuctl.services") and (keys := _wire_keys_in(path.read_text()))
    }
    assert found == {}


def test_the_body_check_sees_a_body() -> None:
    assert _wire_keys_in('body = {"acceleratorType": acc, "labels": {}}') == ["acceleratorType"]
    assert _wire_keys_in('node.raw.get("queuedResource")') == ["queuedResource"]
    assert "acceleratorType" in _wire_keys_in((PACKAGE / "cloud" / "tpu_wire.py").read_text())


def test_only_the_client_factory_reads_the_emulator_switch() -> None:
    """Nothing asks "am I emulated?": the factory picks endpoints and credentials (the
    emulator, and the command that starts it, know their own address)."""
    readers = sorted(
        name
        for name, path in MODULES.items()
        if "TPUCTL_EMULATOR_HOST" in path.read_text()
        and not _in(name, "tpuctl.emulator")
        and name not in ("tpuctl.cloud.clients", "tpuctl.cli.emulator_cmd")
    )
    assert readers == []
