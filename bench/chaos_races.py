"""`make chaos`'s races between two actors (bench/chaos.py runs them; its Harness and
Outcome are passed in):

- claims:   two `run --node N --teardown` started at once on one node: exactly one
            runs, the other is refused (exit 5, one `error:` line naming the job that
            holds the node), and the node goes with the job that ran;
- lease:    the client SIGKILLed once its node is READY and before its agents start (its
            workers' host keys are held back, so it waits there): the node's boot guard
            deletes it within the client's lease, with no gc (worst: seconds from the kill);
- keep:     `tpuctl gc` asks before deleting an expired node, and `tpuctl keep` marks it
            meanwhile: when the answer comes, gc skips it, saying so, and the node stays;
- sweep:    a sweep's `tpuctl run`s started at once on a new machine (no SSH key, no
            config, no state) in a new project (no bucket): every one succeeds, they
            make one key pair between them, no node is left (worst: the slowest run).
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ZONE = "us-central1-a"


def _traceback(text: str) -> bool:
    return "Traceback (most recent call last)" in text or "error: unexpected " in text


def claims(h: Any, outcome: Any, pairs: int) -> Any:
    out = outcome("two `run --node` on one node at once")
    out.notes.append("worst: seconds until the refused run ended")
    h.reset(instant=True)
    h.control.quotas("granted")

    def one(i: int) -> str | None:
        project = f"chaos-claim-{i}"
        r = h.tpuctl("create", "shared", "-a", "v3-8", "--zone", ZONE, "--project", project)
        if r.returncode:
            return f"create failed: {r.stderr.strip()[-160:]}"
        args = ("run", str(h.script), "--node", "shared", "--teardown", "--zone", ZONE,
                "--project", project, "--", "3", "0")  # fmt: skip
        started = time.monotonic()
        procs = [h.spawn(*args), h.spawn(*args)]
        ended = [(p, *p.communicate(timeout=300), time.monotonic() - started) for p in procs]
        codes = sorted(p.returncode for p, *_ in ended)
        refused = [e for p, _, e, _ in ended if p.returncode == 5]
        out.worst = max([out.worst, *(s for p, _, _, s in ended if p.returncode == 5)])
        if any(_traceback(e) for _, _, e, _ in ended):
            out.tracebacks += 1
        if codes != [0, 5] or not refused or "is busy: job " not in refused[0]:
            return f"exits {codes}: {[e.strip()[-120:] for _, _, e, _ in ended]}"
        gone = h.wait_gone(timeout=60, project=project)
        return None if gone is not None else "the node outlived the job that ran"

    with ThreadPoolExecutor(3) as pool:
        for why in pool.map(one, range(pairs)):
            out.runs += 1
            if why is None:
                out.good += 1
            else:
                out.notes.append(why)
    out.leaked = len(h.leftovers())
    h.clean()
    return out


def lease(h: Any, outcome: Any, runs: int, seconds: float) -> Any:
    out = outcome("client killed between READY and the agents' start")
    out.notes.append(f"worst: seconds from the kill until the node was gone ({seconds:g} s lease)")
    h.reset(instant=True)
    h.control.quotas("granted")
    # The VMs boot slowly (no host keys for an hour): every client waits there, after READY.
    h.control.durations(hostkeys=3600)

    def one(i: int) -> float | None:
        project = f"chaos-lease-{i}"
        proc = h.spawn("run", str(h.script), "--zone", ZONE, "--project", project,
                       "--start-lease", f"{int(seconds)}s", "--", "2", "0")  # fmt: skip
        ready = _until(lambda: _ready(h, project), 120)
        proc.kill()
        proc.communicate()
        if not ready:
            return None
        return h.wait_gone(timeout=seconds + 60, project=project)

    try:
        with ThreadPoolExecutor(runs) as pool:
            for gone in pool.map(one, range(runs)):
                out.count_gone(gone, "a node outlived its client's lease by a minute")
    finally:
        h.control.durations(hostkeys=1.0)  # the emulator's default
    h.clean()
    return out


def _ready(h: Any, project: str) -> bool:
    nodes = [n for n in h.control.call("GET", "nodes") if str(n["name"]).startswith(
        f"projects/{project}/")]  # fmt: skip
    return bool(nodes) and all(n["state"] == "READY" for n in nodes)


def _until(condition: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return False


def keep_during_gc(h: Any, outcome: Any, runs: int) -> Any:
    import pexpect

    out = outcome("gc confirming after a keep")
    h.reset(instant=True)
    for i in range(runs):
        out.runs += 1
        project, name = f"chaos-gc-{i}", f"expired-{i}"
        # Its own startup script: no watchdog of tpuctl's deletes it at its TTL, gc must.
        r = h.tpuctl("create", name, "-a", "v3-8", "--zone", ZONE, "--project", project,
                     "--ttl", "1s", "--metadata", "startup-script=true")  # fmt: skip
        if r.returncode:
            out.notes.append(f"create failed: {r.stderr.strip()[-160:]}")
            continue
        time.sleep(1.5)  # past its TTL of 1 s: gc's plan deletes it
        gc = pexpect.spawn(sys.executable, ["-m", "tpuctl", "gc", "--project", project], env=h.env,
                           encoding="utf-8", timeout=120)  # fmt: skip
        try:
            gc.expect(r"Delete 1 resource\(s\)\? \[y/N\]: ")
            kept = h.tpuctl("keep", name, "--zone", ZONE, "--project", project)
            gc.sendline("y")
            gc.expect(pexpect.EOF)
        finally:
            gc.close()
        said = gc.before or ""
        if _traceback(said):
            out.tracebacks += 1
        left = h.leftovers(project)
        if kept.returncode == 0 and left == [name] and "skipped" in said:
            out.good += 1
        else:
            out.notes.append(f"keep {kept.returncode}, left {left}: {said.strip()[-160:]}")
        h.tpuctl("delete", name, "--zone", ZONE, "--project", project, "--yes")
    out.leaked = len(h.leftovers())
    h.clean()
    return out


def sweep(h: Any, outcome: Any, rounds: int, at_once: int) -> Any:
    out = outcome("a sweep's runs at once on a new machine")
    out.notes.append("worst: seconds the slowest run of a round took")
    h.reset(instant=True)
    h.control.quotas("granted")
    for i in range(rounds):
        out.runs += 1
        machine = Path(h.root) / f"sweep-{i}"  # nothing in it: the key, config, state to make
        env = dict(h.env, HOME=str(machine / "home"), XDG_CONFIG_HOME=str(machine / "config"),
                   XDG_STATE_HOME=str(machine / "state"))  # fmt: skip
        project = f"chaos-sweep-{i}"  # no bucket yet: every run wants to make it
        command = [sys.executable, "-m", "tpuctl", "run", str(h.script), "--zone", ZONE,
                   "--project", project, "--", "1", "0"]  # fmt: skip
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            for _ in range(at_once)
        ]
        ended = []
        for proc in procs:
            try:
                _, err = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                err += "\n(no end within 300 s: killed)"
            ended.append((proc.returncode, err))
        out.worst = max(out.worst, time.monotonic() - started)
        out.tracebacks += sum(_traceback(err) for _, err in ended)
        keys = list((machine / "home" / ".ssh").glob("google_compute_engine*"))
        failed = [err.strip()[-160:] for code, err in ended if code != 0]
        if failed:
            out.notes.append(f"{len(failed)} of {at_once} failed: {failed[0]}")
        elif sorted(k.name for k in keys) != ["google_compute_engine", "google_compute_engine.pub"]:
            out.notes.append(f"the key files: {sorted(k.name for k in keys)}")
        elif h.wait_gone(timeout=60, project=project) is None:
            out.notes.append("a node outlived its run by a minute")
        else:
            out.good += 1
    out.leaked = len(h.leftovers())
    h.clean()
    return out
