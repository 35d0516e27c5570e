"""The layers go one way, and nothing leans on a lazy import to dodge a cycle.

The import graph of tpuctl/ is read from the source: every import counts, at the top
of a module, inside a function, or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import re
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
    allowed = _in(src, "tpuctl.emulator") or _in(src, "tpuctl.cli.emulator_cmd")
    return _in(dst, "tpuctl.emulator") and not allowed


def emulator_imports_client(src: str, dst: str) -> bool:
    """the emulator importing tpuctl's client code: it keeps its own tables of what the
    cloud offers (emulator/offerings/) and its own helpers, so that a wrong table in the
    client is caught by the emulator, not mirrored (tests/test_offerings.py compares them)."""
    client = _in(dst, "tpuctl") and not _in(dst, "tpuctl.emulator")
    return _in(src, "tpuctl.emulator") and client


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


RULES = [
    cli_below,
    services_below,
    emulator_imported,
    emulator_imports_client,
    google_outside_cloud,
    agent_outside_stdlib,
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_no_import_breaks_the_rule(rule: Callable[[str, str], bool]) -> None:
    assert _violations(rule) == []


def test_outside_the_agent_only_its_protocol_bundle_and_labels_are_imported() -> None:
    """The laptop shares the job protocol with the agent (its claims and leases too, how
    an environment is keyed, the outputs' manifests, how a job's key is derived and how
    the agents sign with it), ships its bundle and takes its label names; the rest of the
    agent (HTTP, token, Storage client) is the VM's. The emulator, which hosts emulated
    workers, is a wing of its own."""
    shared = {"tpuctl.agent.protocol", "tpuctl.agent.claims", "tpuctl.agent.bundle",
              "tpuctl.agent.labels", "tpuctl.agent.envkeys", "tpuctl.agent.manifests",
              "tpuctl.agent.signing"}  # fmt: skip

    def wrong(src: str, dst: str) -> bool:
        outside = not _in(src, "tpuctl.agent") and not _in(src, "tpuctl.emulator")
        return outside and _in(dst, "tpuctl.agent") and dst not in shared

    assert _violations(wrong) == []


def test_the_rules_see_a_violation() -> None:
    """The graph is real: known edges are in it (a parser that saw nothing would pass)."""
    assert "tpuctl.services.nodes" in GRAPH["tpuctl.services.run.provision"]
    assert "tpuctl.cloud.tpu.api" in GRAPH["tpuctl.cloud.clients"]  # a lazy import counts
    assert "tpuctl.cloud.backend" in GRAPH["tpuctl.services.nodes"]  # so does TYPE_CHECKING
    assert "tpuctl.agent.protocol" in GRAPH["tpuctl.agent.transfer"]  # and a relative one


# A module written to break each rule with a relative import, as the rules must see it.
_RELATIVE_BREAKS = [
    (cli_below, "tpuctl.cloud.tpu", False, "from ..cli import render"),
    (cli_below, "tpuctl.services.run.spec", False, "from ...cli.render import table"),
    (services_below, "tpuctl.cloud.storage", False, "from ..services import staging"),
    (emulator_imported, "tpuctl.services.nodes", False, "from ..emulator.backend import Backend"),
    (emulator_imported, "tpuctl.cli", True, "from ..emulator import daemon"),
    (emulator_imports_client, "tpuctl.emulator.tpu.rules", False, "from ... import catalog"),
    (emulator_imports_client, "tpuctl.emulator.control", True, "from ...agent import processes"),
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


@pytest.mark.parametrize(
    "source",
    [
        "from tpuctl import catalog",
        "from tpuctl.timestamps import parse_rfc3339",
        "import tpuctl.errors",
        "def f():\n    from tpuctl.agent.processes import alive",
    ],
)
def test_the_emulator_importing_client_code_fails_the_rule(source: str) -> None:
    module = "tpuctl.emulator.tpu.rules"
    assert len(_violations(emulator_imports_client, {module: imports_of(source, module)})) == 1
    own = "from tpuctl.emulator.offerings import zones\nimport tpuctl.emulator.core.errors"
    assert _violations(emulator_imports_client, {module: imports_of(own, module)}) == []


# The APIs' request and answer keys: their adapters' business (cloud/tpu/wire.py; Compute
# Engine's cloud/compute/wire.py and slices.py).
TPU_WIRE_KEYS = (
    "acceleratorType",
    "schedulingConfig",
    "networkConfig",
    "queuedResource",
    "multisliceParams",
    "nodeSpec",
    "queueingPolicy",
)
COMPUTE_WIRE_KEYS = (
    "machineType",
    "networkInterfaces",
    "accessConfigs",
    "reservationAffinity",
    "consumeReservationType",
    "requestValidForDuration",
    "onHostMaintenance",
    "initializeParams",
    "sourceImage",
    "instanceTemplate",
    "targetSize",
    "workloadPolicy",
    "resourcePolicies",
)
WIRE_KEYS = TPU_WIRE_KEYS + COMPUTE_WIRE_KEYS


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
    assert _wire_keys_in('vm["networkInterfaces"][0]') == ["networkInterfaces"]
    assert "acceleratorType" in _wire_keys_in((PACKAGE / "cloud" / "tpu" / "wire.py").read_text())
    compute = (PACKAGE / "cloud" / "compute" / "wire.py").read_text()
    assert {"machineType", "reservationAffinity"} <= set(_wire_keys_in(compute))


# -- one adapter per API: nothing above cloud/ asks which API it holds -------------------
def _api_keys() -> tuple[str, ...]:
    from tpuctl.cloud import registry

    return registry.known()


def _names_an_api(node: ast.expr, keys: tuple[str, ...]) -> bool:
    """An API's registry key as a literal, alone or in a literal tuple, list or set."""
    if isinstance(node, ast.Constant):
        return node.value in keys
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in keys for e in node.elts)
    return False


def api_comparisons(source: str, keys: tuple[str, ...]) -> list[int]:
    """The lines of `source` that compare a value with an API's name (`x.api == ...`,
    `... != "compute"`, `value in ("tpu", "compute")`): a branch on which API is behind a
    value, which belongs in that API's adapter."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        equality = any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
        member = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        named = any(isinstance(s, ast.Constant) and s.value in keys for s in sides)
        listed = any(_names_an_api(s, keys) for s in node.comparators)
        attr = any(isinstance(s, ast.Attribute) and s.attr == "api" for s in sides)
        if (equality and (named or attr)) or (member and listed):
            lines.append(node.lineno)
    return lines


def test_nothing_above_cloud_compares_an_apis_name() -> None:
    keys = _api_keys()
    found = {
        name: lines
        for name, path in MODULES.items()
        if (_in(name, "tpuctl.services") or _in(name, "tpuctl.cli"))
        and (lines := api_comparisons(path.read_text(), keys))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source",
    [
        'if node.api == "compute": pass',
        "if backend.api != other: pass",
        'x = "tpu" if flag else "compute"\nif x == "tpu": pass',
        'if value not in ("tpu", "compute", "auto"): pass',
    ],
)
def test_the_api_check_sees_a_comparison(source: str) -> None:
    assert api_comparisons(source, ("tpu", "compute")) != []


def test_the_api_check_lets_other_text_be() -> None:
    # a string that happens to hold an API's name (`jax[tpu]`) is no branch on an API
    assert api_comparisons('ok = "tpu" not in extras\nname = "compute"', ("tpu", "compute")) == []


def adapter_imported(src: str, dst: str) -> bool:
    """an API's own package imported from above cloud/ (services and CLI ask the backend
    protocol and the registry, never an adapter; the quota usage an API's nodes hold is
    its adapter's `quota_usage`)."""
    adapter = _in(dst, "tpuctl.cloud.tpu") or _in(dst, "tpuctl.cloud.compute")
    above = _in(src, "tpuctl.services") or _in(src, "tpuctl.cli")
    return adapter and above


def test_no_adapter_is_imported_from_above_cloud() -> None:
    assert _violations(adapter_imported) == []
    graph = {
        "tpuctl.services.create": imports_of(
            "from ..cloud.compute import flex", "tpuctl.services.create"
        )
    }
    assert len(_violations(adapter_imported, graph)) == 1


POSITIONAL = re.compile(r"backends\(\)\[0\]|KINDS\[0\]|backends\[0\]")


def test_nothing_depends_on_the_registrys_order() -> None:
    """Callers ask a backend's declared capabilities (`registry.requests_api`,
    `quota_api`, `preferred`, `holder`), never its place in the registry."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{i}"
        for path in MODULES.values()
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if POSITIONAL.search(line)
    ]
    assert found == []
    assert POSITIONAL.search("api = backends[0]") and POSITIONAL.search("registry.KINDS[0]")


def test_the_cloud_modules_import_no_cycle_through_a_lazy_import() -> None:
    """cloud.backend -> cloud.compute -> cloud.quota closed a cycle once: no cloud module
    reaches into an API's package but the registry, the client factory and that API's own."""
    reach = {
        (src, dst)
        for src in GRAPH
        if _in(src, "tpuctl.cloud") and src not in ("tpuctl.cloud.registry", "tpuctl.cloud.clients")
        for dst in _internal(src)
        for api in ("tpuctl.cloud.tpu", "tpuctl.cloud.compute")
        if _in(dst, api) and not _in(src, api)
    }
    assert reach == set()


def test_only_the_client_factory_reads_the_emulator_switch() -> None:
    """Nothing asks "am I emulated?": the factory's endpoints pick endpoints and
    credentials (the emulator, and the command that starts it, know their own address)."""
    readers = sorted(
        name
        for name, path in MODULES.items()
        if "TPUCTL_EMULATOR_HOST" in path.read_text()
        and not _in(name, "tpuctl.emulator")
        and name != "tpuctl.cloud.endpoints"
        and not _in(name, "tpuctl.cli.emulator_cmd")
    )
    assert readers == []


MAX_MODULE_LINES = 450


def oversized(source: str, limit: int = MAX_MODULE_LINES) -> list[str]:
    """What breaks the size rule in a module as `ruff format` writes it: more than `limit`
    lines, or lines kept from the formatter (`# fmt: skip`, `# fmt: off`)."""
    found = [f"{len(source.splitlines())} lines"] if len(source.splitlines()) > limit else []
    kept = [
        n
        for n, line in enumerate(source.splitlines(), 1)
        if "# fmt: skip" in line or "# fmt: off" in line
    ]
    return found + [f"line {n} kept from the formatter" for n in kept]


def test_no_module_is_packed_or_over_the_size_limit() -> None:
    found = {name: oversized(path.read_text()) for name, path in _modules().items()}
    assert {name: why for name, why in found.items() if why} == {}


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("x = 1\n" * 451, ["451 lines"]),
        ("x = [1,  2]  # fmt: skip\n", ["line 1 kept from the formatter"]),
        ("# fmt: off\nx = 1\n# fmt: on\n", ["line 1 kept from the formatter"]),
    ],
)
def test_the_size_check_sees_a_violation(source: str, why: list[str]) -> None:
    assert oversized(source) == why
    assert oversized("x = 1\n" * 450) == []
