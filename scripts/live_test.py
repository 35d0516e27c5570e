"""`make test-live`: tpuctl's main scenarios against a real Google Cloud project.

    TPUCTL_LIVE_PROJECT=my-project TPUCTL_LIVE_ZONE=us-central1-a make test-live

Without both variables it says it was skipped and why, and exits 0. With them:
1. it picks the cheapest single-host accelerator the zone offers, priced as spot
   (TPUCTL_LIVE_ACCELERATOR overrides the choice, never the guards below);
2. it sweeps what earlier live runs left behind and is expired (a run killed outright);
3. it prints the worst case, every node the scenarios create living its whole TTL,
   and asks before it starts (`--yes` or TPUCTL_LIVE_YES=1 for CI);
4. it runs the scenarios (`live/test_scenarios.py`) in a child process: every node and
   queued resource they make is spot, has a TTL, and is named `tlive-<run id>-...`;
5. whatever happened to the child (failed, crashed, killed), it then deletes every
   node and queued resource whose name carries the run's id, and names each one.

It talks to whatever tpuctl talks to: pointed at the emulator (TPUCTL_EMULATOR_HOST), it
is a rehearsal, which is how `make test` proves the guards (tests/test_live_suite.py).
contributing/live-testing.md says what it costs.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from tpuctl.cloud.tpu.api import TpuApi

PREFIX = "tlive-"  # every live run's resources: tlive-<run id>-<scenario>
NODES = 4  # nodes (or queued requests) the scenarios create, at most
DEFAULT_TTL = "2h"


@dataclass(frozen=True)
class Choice:
    accelerator: str
    hourly: float  # spot, USD per hour for the slice


def say(text: str) -> None:
    print(f"live: {text}", file=sys.stderr, flush=True)


def cheapest_single_host(offered: list[str]) -> Choice | None:
    """The single-host type with the lowest spot price among `offered` (fewest chips on a
    tie); types tpuctl's catalogue does not know are left out, as they cannot be priced."""
    from tpuctl import catalog
    from tpuctl.errors import TpuctlError
    from tpuctl.services import cost

    best: tuple[float, int, str] | None = None
    for name in offered:
        try:
            acc = catalog.parse_accelerator(name)
        except TpuctlError:
            continue
        if acc.workers != 1:
            continue
        key = (cost.hourly(acc, True) or float("inf"), acc.chips, name)
        best = key if best is None or key < best else best
    return None if best is None else Choice(best[2], best[0])


def sweep(api: TpuApi, parent: str, wanted: str, why: str, expired_only: bool = False) -> list[str]:
    """Delete the queued resources and nodes in `parent` whose name starts with `wanted`
    (with `expired_only`, only those whose tpuctl-expires label has passed); returns what
    went, each said on stderr with `why`."""
    from tpuctl.errors import NotFoundError

    now = time.time()
    gone: list[str] = []

    def expired(labels: dict[str, str]) -> bool:
        value = labels.get("tpuctl-expires", "")
        return value.isdigit() and int(value) < now

    for qr in api.list_queued_resources(parent):
        short = qr.name
        if short.startswith(wanted) and (not expired_only or expired(qr.labels)):
            try:
                api.delete_queued_resource(qr.full_name, force=True)
            except NotFoundError:
                continue
            gone.append(f"queued resource {short}")
            say(f"deleted queued resource {short} ({why})")
    for node in api.list_nodes(parent):
        short = node.name
        if short.startswith(wanted) and (not expired_only or expired(node.labels)):
            try:
                api.delete_node(node.full_name)
            except NotFoundError:
                continue
            gone.append(f"node {short}")
            say(f"deleted node {short} ({why})")
    return gone


def confirm(text: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        say("not started: confirm with --yes (or TPUCTL_LIVE_YES=1) where there is no terminal")
        return False
    print(f"{text} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    pytest_args = [a for a in argv if a != "--yes"]  # the rest goes to pytest (-k quota)
    project = os.environ.get("TPUCTL_LIVE_PROJECT", "")
    zone = os.environ.get("TPUCTL_LIVE_ZONE", "")
    if not project or not zone:
        missing = [
            n for n, v in (("TPUCTL_LIVE_PROJECT", project), ("TPUCTL_LIVE_ZONE", zone)) if not v
        ]
        say(
            f"skipped: {' and '.join(missing)} not set"
            " (contributing/live-testing.md says how to run it)"
        )
        return 0
    yes = "--yes" in argv or os.environ.get("TPUCTL_LIVE_YES", "") in ("1", "true", "yes")
    ttl = os.environ.get("TPUCTL_LIVE_TTL", DEFAULT_TTL)

    from tpuctl import catalog
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.durations import format_duration, parse_duration
    from tpuctl.errors import TpuctlError
    from tpuctl.services import cost

    try:
        ttl_seconds = parse_duration(ttl, "TPUCTL_LIVE_TTL")
        api = ClientFactory().tpu()
        parent = f"projects/{project}/locations/{zone}"
        wanted = os.environ.get("TPUCTL_LIVE_ACCELERATOR", "")
        if wanted:
            choice = Choice(wanted, cost.hourly(catalog.shape(wanted), True) or 0.0)
        else:
            found = cheapest_single_host(api.accelerator_types(parent))
            if found is None:
                say(f"not started: zone {zone} offers no single-host TPU type tpuctl can price")
                return 1
            choice = found
        sweep(api, parent, PREFIX, "an earlier live run's, expired", expired_only=True)
    except TpuctlError as e:
        say(f"not started: {e}")
        return e.exit_code
    worst = NODES * choice.hourly * ttl_seconds / 3600
    say(
        f"project {project}, zone {zone}: {choice.accelerator} (spot, ${choice.hourly:.2f}/h); "
        f"at worst {NODES} nodes for their whole {format_duration(ttl_seconds)} TTL: "
        f"${worst:.2f}; a run that goes well holds nodes for about 15 minutes "
        f"(${NODES * choice.hourly * 0.25:.2f})"
    )
    if not confirm("Start the live suite?", yes):
        return 2
    run = f"{PREFIX}{secrets.token_hex(3)}-"
    env = dict(
        os.environ,
        TPUCTL_PROJECT=project,
        TPUCTL_LIVE_RUN=run,
        TPUCTL_LIVE_ACCELERATOR=choice.accelerator,
        TPUCTL_LIVE_TTL=ttl,
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        str(ROOT / "live"),
        *pytest_args,
    ]
    child = subprocess.Popen(command, env=env, cwd=ROOT)
    say(f"run {run.rstrip('-')}: scenarios started (pid {child.pid})")
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    signal.signal(signal.SIGHUP, lambda *_: child.terminate())
    code = 1
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.terminate()
        code = child.wait()
    finally:
        try:
            left = sweep(api, parent, run, f"left by live run {run.rstrip('-')}")
        except TpuctlError as e:
            say(f"the final sweep failed: {e}; delete tpuctl's nodes named {run}* by hand")
            return 1
    if left:
        say(f"the scenarios left {len(left)} behind; the sweep deleted them")
        return code or 1
    say("nothing left behind")
    return code


if __name__ == "__main__":
    sys.exit(main())
