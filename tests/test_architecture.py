"""The layers go one way, and nothing leans on a lazy import to dodge a cycle.

The import graph of tpuctl/ is read from the source: every import counts, at the top
of a module, inside a function, or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

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


def _imports(path: Path) -> set[str]:
    """Every module name the file imports (`from a import b` is a.b when b is a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names.add(sub if sub in MODULES else node.module)
    return names


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


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


def _violations(rule: Callable[[str, str], bool]) -> list[str]:
    return sorted(f"{src} imports {dst}" for src in GRAPH for dst in GRAPH[src] if rule(src, dst))


def test_services_and_cloud_never_import_the_cli() -> None:
    def wrong(src: str, dst: str) -> bool:
        below_cli = _in(src, "tpuctl.services") or _in(src, "tpuctl.cloud")
        return below_cli and _in(dst, "tpuctl.cli")

    assert _violations(wrong) == []


def test_cloud_adapters_never_import_services() -> None:
    assert _violations(lambda s, d: _in(s, "tpuctl.cloud") and _in(d, "tpuctl.services")) == []


def test_only_the_emulator_command_imports_the_emulator() -> None:
    def wrong(src: str, dst: str) -> bool:
        allowed = _in(src, "tpuctl.emulator") or src == "tpuctl.cli.emulator_cmd"
        return _in(dst, "tpuctl.emulator") and not allowed

    assert _violations(wrong) == []


def test_only_cloud_adapters_and_the_emulator_import_google_and_asyncssh() -> None:
    def wrong(src: str, dst: str) -> bool:
        allowed = _in(src, "tpuctl.cloud") or _in(src, "tpuctl.emulator")
        return (dst.split(".")[0] in ("google", "asyncssh")) and not allowed

    assert _violations(wrong) == []


def test_the_agent_imports_only_the_standard_library_and_itself() -> None:
    agent_dir = PACKAGE / "agent"
    siblings = {p.stem for p in agent_dir.glob("*.py")}

    def wrong(src: str, dst: str) -> bool:
        if not _in(src, "tpuctl.agent"):
            return False
        top = dst.split(".")[0]
        own = _in(dst, "tpuctl.agent") or top in siblings
        return not own and top not in sys.stdlib_module_names and top != "__future__"

    assert _violations(wrong) == []


def test_outside_the_agent_only_its_protocol_bundle_and_labels_are_imported() -> None:
    """The laptop shares the job protocol with the agent, ships its bundle and takes its
    label names; the rest of the agent (HTTP, token, Storage client) is the VM's. The
    emulator, which hosts emulated workers, is a wing of its own."""
    shared = {"tpuctl.agent.protocol", "tpuctl.agent.bundle", "tpuctl.agent.labels"}

    def wrong(src: str, dst: str) -> bool:
        outside = not _in(src, "tpuctl.agent") and not _in(src, "tpuctl.emulator")
        return outside and _in(dst, "tpuctl.agent") and dst not in shared

    assert _violations(wrong) == []


def test_the_rules_see_a_violation() -> None:
    """The graph is real: known edges are in it (a parser that saw nothing would pass)."""
    assert "tpuctl.services.nodes" in GRAPH["tpuctl.services.run.provision"]
    assert "tpuctl.cloud.tpu" in GRAPH["tpuctl.cloud.clients"]  # a lazy import counts
    assert "tpuctl.cloud.tpu" in GRAPH["tpuctl.services.nodes"]  # so does TYPE_CHECKING
