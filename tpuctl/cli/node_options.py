"""The options that describe a TPU node, declared once for every command that makes one
(`create`, and `run` for the node a job makes; a job file's keys are the same names).

Each is an `Annotated` alias (tpuctl/cli/declare.py); a command names its parameter as it
likes. Help is written for both commands: what a flag means does not depend on which one
is asked.
"""

from __future__ import annotations

from typing import Annotated

from tpuctl.cli import declare

Version = Annotated[
    str | None,
    declare.Option("--version", help="Runtime version (default: the generation's base image)."),
]
Spot = Annotated[bool, declare.Option("--spot", help="Spot capacity: cheaper, can be preempted.")]
Preemptible = Annotated[
    bool, declare.Option("--preemptible", help="Legacy preemptible capacity (24 h max).")
]
Reserved = Annotated[
    bool,
    declare.Option(
        "--reserved", help="Use the project's reservation (Compute Engine: any matching one)."
    ),
]
Reservation = Annotated[
    str | None,
    declare.Option(
        "--reservation", help="Compute Engine: consume this reservation (name or its path)."
    ),
]
Labels = Annotated[
    list[str], declare.Option("--labels", help="The node's labels: k=v[,k=v...]; repeatable.")
]
Network = Annotated[
    str | None, declare.Option("--network", help="The VPC network (default: default).")
]
Subnetwork = Annotated[str | None, declare.Option("--subnetwork", help="The subnetwork.")]
ServiceAccount = Annotated[
    str | None,
    declare.Option(
        "--service-account",
        help="The node's service account (default: the project's default compute account); "
        "for `run` it must be able to write the bucket and delete the node.",
    ),
]
Scopes = Annotated[
    list[str],
    declare.Option("--scopes", help="The node's OAuth scopes: a,b (default cloud-platform)."),
]
InternalIpOnly = Annotated[
    bool,
    declare.Option(
        "--internal-ip-only",
        help="No external IPs on the workers (tpuctl then reaches them at their internal "
        "address: run it from inside the VPC network or over a VPN into it).",
    ),
]
Tags = Annotated[
    list[str], declare.Option("--tags", help="Network tags for firewall rules: a,b; repeatable.")
]
Ttl = Annotated[
    str | None,
    declare.Option(
        "--ttl",
        help="Delete the node after this long (e.g. 8h); the node enforces it itself "
        "(a node `run` makes: 7d unless given).",
    ),
]
MaxCost = Annotated[
    str | None,
    declare.Option(
        "--max-cost",
        help="Delete the node once it has cost this many US dollars at list price (e.g. 50).",
    ),
]
Queued = Annotated[
    bool,
    declare.Option("--queued", help="Ask through a queued resource: wait for capacity."),
]
Slices = Annotated[
    int,
    declare.Option(
        "--slices",
        help="Multislice: this many slices of the accelerator (1 to 1024), made as one unit (one "
        "queued resource on the Cloud TPU API; implies --queued when more than 1; "
        "docs/multislice.md).",
    ),
]
ValidUntil = Annotated[
    str | None,
    declare.Option(
        "--valid-until",
        help="With --queued or --flex-start: give up after waiting this long (e.g. 6h).",
    ),
]
FlexStart = Annotated[
    bool,
    declare.Option(
        "--flex-start",
        help="Flex-start capacity: wait for it, run --max-run-duration, then be deleted "
        "(implies --queued on the TPU API; a flex-start VM on Compute Engine).",
    ),
]
MaxRunDuration = Annotated[
    str | None,
    declare.Option(
        "--max-run-duration", help="With --flex-start: how long the TPUs run (e.g. 4h; 7d max)."
    ),
]
