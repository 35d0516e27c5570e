"""The options that describe a TPU node, declared once for every command that makes one
(`create`, and `run` for the node a job makes; a job file's keys are the same names).

Each is a typer `Annotated` alias; a command names its parameter as it likes. Help is
written for both commands: what a flag means does not depend on which one is asked.
"""

from __future__ import annotations

from typing import Annotated

import typer

Version = Annotated[
    str | None,
    typer.Option("--version", help="Runtime version (default: the generation's base image)."),
]
Spot = Annotated[bool, typer.Option("--spot", help="Spot capacity: cheaper, can be preempted.")]
Preemptible = Annotated[
    bool, typer.Option("--preemptible", help="Legacy preemptible capacity (24 h max).")
]
Reserved = Annotated[
    bool,
    typer.Option(
        "--reserved", help="Use the project's reservation (Compute Engine: any matching one)."
    ),
]
Reservation = Annotated[
    str | None,
    typer.Option(
        "--reservation", help="Compute Engine: consume this reservation (name or its path)."
    ),
]
Labels = Annotated[
    list[str], typer.Option("--labels", help="The node's labels: k=v[,k=v...]; repeatable.")
]
Network = Annotated[
    str | None, typer.Option("--network", help="The VPC network (default: default).")
]
Subnetwork = Annotated[str | None, typer.Option("--subnetwork", help="The subnetwork.")]
ServiceAccount = Annotated[
    str | None,
    typer.Option(
        "--service-account",
        help="The node's service account (default: the project's default compute account); "
        "for `run` it must be able to write the bucket and delete the node.",
    ),
]
Scopes = Annotated[
    list[str],
    typer.Option("--scopes", help="The node's OAuth scopes: a,b (default cloud-platform)."),
]
InternalIpOnly = Annotated[
    bool,
    typer.Option(
        "--internal-ip-only",
        help="No external IPs on the workers (tpuctl then reaches them at their internal "
        "address: run it from inside the VPC network or over a VPN into it).",
    ),
]
Tags = Annotated[
    list[str], typer.Option("--tags", help="Network tags for firewall rules: a,b; repeatable.")
]
Ttl = Annotated[
    str | None,
    typer.Option(
        "--ttl",
        help="Delete the node after this long (e.g. 8h); the node enforces it itself "
        "(a node `run` makes: 7d unless given).",
    ),
]
MaxCost = Annotated[
    str | None,
    typer.Option(
        "--max-cost",
        help="Delete the node once it has cost this many US dollars at list price (e.g. 50).",
    ),
]
Queued = Annotated[
    bool,
    typer.Option("--queued", help="Ask through a queued resource: wait for capacity."),
]
Slices = Annotated[
    int,
    typer.Option(
        "--slices",
        help="Multislice: this many slices of the accelerator (1 to 1024), made as one unit (one "
        "queued resource on the Cloud TPU API; implies --queued when more than 1; "
        "docs/multislice.md).",
    ),
]
ValidUntil = Annotated[
    str | None,
    typer.Option(
        "--valid-until",
        help="With --queued or --flex-start: give up after waiting this long (e.g. 6h).",
    ),
]
FlexStart = Annotated[
    bool,
    typer.Option(
        "--flex-start",
        help="Flex-start capacity: wait for it, run --max-run-duration, then be deleted "
        "(implies --queued on the TPU API; a flex-start VM on Compute Engine).",
    ),
]
MaxRunDuration = Annotated[
    str | None,
    typer.Option(
        "--max-run-duration", help="With --flex-start: how long the TPUs run (e.g. 4h; 7d max)."
    ),
]
