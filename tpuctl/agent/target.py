"""What the job runs on, for the agent, the boot guard and the idle watchdog: a node of
the Cloud TPU API (tpu_api.TpuNode) or a Compute Engine VM or slice
(compute_api.ComputeNode), with the one interface both have: `read` (the resource, with
its labels), `delete` (its operation, or None when gone), `what` (how the log names it),
and the `permissions` and `role` its delete needs.

Which one comes from the client, over SSH or in the startup script it wrote
(`--api compute --node NAME`): the TPU API's nodes name themselves in `tpu-env`; on
Compute Engine the VM of a slice knows its group only from `created-by`, and a single VM
is its node.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import argparse
from typing import Any, Union

from .compute_api import ComputeNode
from .metadata import Token
from .tpu_api import TpuNode

Target = Union[TpuNode, ComputeNode]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", choices=("tpu", "compute"), default="tpu",
                        help="the API the job's node is on")  # fmt: skip
    parser.add_argument("--node", default="",
                        help="on Compute Engine: the job's VM, or its slice's group")  # fmt: skip


def of(token: Token, me: Any, api: str = "tpu", node: str = "") -> Target:
    """The target for this VM (`me`: metadata.identity())."""
    if api == "compute":
        return ComputeNode(token, me["project"], me["zone"], node or me["node"], me["workers"])
    return TpuNode(token, me["project"], me["zone"], node or me["node"])
