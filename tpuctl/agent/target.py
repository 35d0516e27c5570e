"""What the job runs on, for the agent, the boot guard, the idle watchdog and the
checkup: a node of whichever API the client made it on. Each API's class has the one
interface the rest of the agent uses (`Target` below):
- `read` (the resource, with its labels), `view` (what the watchdog reads, in the TPU
  API's words), `set_label`, `stop`, `delete` (its operation, or None when gone);
- `created` (its create time, as the client's claim names it: claims.py);
- `tensorcore_idle` (Cloud Monitoring's evidence for this worker: monitoring.py);
- `what` (how the log names it), `called` (how a sentence names its API),
  `permissions` and `role` (what its delete needs), `read_permission` (what `read`
  needs), `hosts_from_metadata` (whether JAX finds the slice's hosts by itself).

The client names it, over SSH or in the startup script it wrote, as `--target KIND:NAME`
(`tpu:my-node`, `compute:my-node`): KIND is the key of the client's API
(`BackendKind.key`), NAME the node's name as the client knows it (on Compute Engine the
VM, or the managed instance group of a slice, which a VM of it knows only from
`created-by`). KIND's class is `TARGET` of the module `targets/KIND.py`: the agent's own
(targets/tpu.py, targets/compute.py), or one the bundle carries for a further API
(`BackendKind.agent_module`, bundle.py). Nothing here names an API: a kind with no such
module in the bundle is refused when the arguments are read, with a message on stderr
(which the startup script's programs write to their logs).

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pkgutil
from typing import Any, NamedTuple, Protocol

from .metadata import Token
from .net import Json

TARGETS = __name__.rpartition(".")[0] + ".targets"  # the package of the kinds' modules


class Target(Protocol):
    """What the job runs on, as the agent uses it (each API's class: targets/KIND.py)."""

    called: str
    permissions: list[str]
    read_permission: str
    role: str
    hosts_from_metadata: bool
    token: Token
    project: str
    zone: str
    name: str
    path: str
    what: str

    def read(self) -> Json: ...
    def view(self) -> Json: ...
    def created(self) -> str: ...
    def tensorcore_idle(self, worker: int, now: float) -> float | None: ...
    def set_label(self, key: str, value: str, node: Json) -> None: ...
    def stop(self) -> None: ...
    def delete(self) -> Json | None: ...
    def request_what(self, request: str) -> str: ...
    def delete_request(self, request: str, slices: int) -> Json | None: ...


class Given(NamedTuple):
    """`--target KIND:NAME`, read."""

    kind: str
    name: str


def known() -> list[str]:
    """The kinds this agent (with what its bundle carries) has a target for."""
    package = importlib.import_module(TARGETS)
    files = getattr(getattr(package.__spec__, "loader", None), "files", None)  # bundle.MAIN's
    if files is None:  # run from the source tree (`python -m tpuctl.agent`)
        return sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    folder = TARGETS.replace(".", "/") + "/"
    found = (f[len(folder) : -len(".py")] for f in files if f.startswith(folder))
    return sorted(n for n in found if n.isidentifier() and n != "__init__")


def module_of(kind: str) -> Any:
    """The module of `kind`'s target, or None when this agent has none."""
    if not kind.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(f"{TARGETS}.{kind}")
    except ImportError:
        return None
    return importlib.import_module(f"{TARGETS}.{kind}") if spec is not None else None


def parse(value: str) -> Given:
    """`KIND:NAME` -> Given; argparse turns the refusal into a usage error on stderr."""
    kind, colon, name = value.partition(":")
    if module_of(kind) is None:
        raise argparse.ArgumentTypeError(
            f"unknown target kind {kind!r} in {value!r}: the agent knows "
            f"{', '.join(known()) or 'none'} (KIND:NAME)"
        )
    if not colon or not name:
        raise argparse.ArgumentTypeError(f"{value!r} names no node: KIND:NAME, e.g. tpu:my-node")
    return Given(kind, name)


def add_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--target",
        type=parse,
        required=required,
        metavar="KIND:NAME",
        help="what the job runs on, as the client names it: KIND its API's key (tpu, "
        "compute, ...), NAME the node (on Compute Engine a VM, or a slice's managed "
        "instance group)",
    )


def of(token: Token, me: Any, given: Given) -> Target:
    """The target `given` names, in this VM's project and zone (`me`: metadata.identity())."""
    target: Target = module_of(given.kind).TARGET.on_this_vm(token, me, given.name)
    return target
