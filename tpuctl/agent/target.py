"""What the job runs on, for the agent, the boot guard, the idle watchdog and the
checkup: a node of the Cloud TPU API (tpu_api.TpuNode) or a Compute Engine VM or slice
(compute_api.ComputeNode). Both have the one interface the rest of the agent uses:
- `read` (the resource, with its labels), `view` (what the watchdog reads, in the TPU
  API's words), `set_label`, `stop`, `delete` (its operation, or None when gone);
- `created` (its create time, as the client's claim names it: claims.py);
- `tensorcore_idle` (Cloud Monitoring's evidence for this worker: monitoring.py);
- `what` (how the log names it), `called` (how a sentence names its API),
  `permissions` and `role` (what its delete needs), `read_permission` (what `read`
  needs), `hosts_from_metadata` (whether JAX finds the slice's hosts by itself).

The client names it, over SSH or in the startup script it wrote, as `--target KIND:NAME`
(`tpu:my-node`, `compute:my-node`): the node's name as the client knows it (on Compute
Engine the VM, or the managed instance group of a slice, which a VM of it knows only
from `created-by`). KINDS below is the one place that maps a kind to its class; a kind
this agent does not know is refused when the arguments are read, with a message on
stderr (which the startup script's programs write to their logs).

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple, Union

from .compute_api import ComputeNode
from .metadata import Token
from .tpu_api import TpuNode

Target = Union[TpuNode, ComputeNode]
# the kinds the client's adapters name (cloud/tpu/__init__.py, cloud/compute/__init__.py)
KINDS: dict[str, type[TpuNode] | type[ComputeNode]] = {"tpu": TpuNode, "compute": ComputeNode}


class Given(NamedTuple):
    """`--target KIND:NAME`, read."""

    kind: str
    name: str


def parse(value: str) -> Given:
    """`KIND:NAME` -> Given; argparse turns the refusal into a usage error on stderr."""
    kind, colon, name = value.partition(":")
    if kind not in KINDS:
        known = ", ".join(sorted(KINDS))
        raise argparse.ArgumentTypeError(
            f"unknown target kind {kind!r} in {value!r}: the agent knows {known} (KIND:NAME)"
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
        help="what the job runs on, as the client names it: tpu:NODE, or compute:VM (a "
        "slice: its managed instance group)",
    )


def of(token: Token, me: Any, given: Given) -> Target:
    """The target `given` names, in this VM's project and zone (`me`: metadata.identity())."""
    return KINDS[given.kind].on_this_vm(token, me, given.name)
