"""tpuctl gc and tpuctl keep: what is collected, what never is, and how gc behaves in cron."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pexpect
from google.cloud import tpu_v2
from google.protobuf import field_mask_pb2

from tests.cli.conftest import one_line_error
from tests.emulator.ssh_helpers import inner_pids, mine, other_host_keys, wait_until

Z = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{Z}"


def names(emulator) -> list[str]:  # noqa: ANN001
    return sorted(n["name"].rsplit("/", 1)[1] for n in emulator.nodes())


def set_label(emulator, node: str, key: str, value: str) -> None:  # noqa: ANN001
    """Edit a label as another client would (the cloud is the source of truth)."""
    client = emulator.tpu_client()
    current = client.get_node(name=f"{PARENT}/nodes/{node}")
    labels = dict(current.labels)
    labels[key] = value
    client.update_node(
        node=tpu_v2.Node(name=f"{PARENT}/nodes/{node}", labels=labels),
        update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
    ).result()


def foreign_node(emulator, name: str, labels: dict[str, str], spot: bool = False) -> None:  # noqa: ANN001
    """A node created without tpuctl (or by another user), straight through the API."""
    node = tpu_v2.Node(
        accelerator_type="v3-8",
        runtime_version="tpu-ubuntu2204-base",
        labels=labels,
        scheduling_config=tpu_v2.SchedulingConfig(spot=spot),
    )
    emulator.tpu_client().create_node(parent=PARENT, node_id=name, node=node).result()


def expire(emulator, node: str) -> None:  # noqa: ANN001
    set_label(emulator, node, "tpuctl-expires", str(int(time.time()) - 120))


def test_expired_and_preempted_are_collected_with_reason_and_cost(cli, emulator) -> None:
    assert cli("create", "old", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    assert cli("create", "young", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    assert cli("create", "spotty", "-a", "v3-8", "--zone", Z, "--spot").code == 0
    expire(emulator, "old")
    emulator.preempt(f"{PARENT}/nodes/spotty")

    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    assert names(emulator) == ["young"]
    assert "deleted old (us-central1-a, v3-8): expired 2m ago (--ttl); stops $8.00/h" in r.out
    assert "deleted spotty (us-central1-a, v3-8): preempted: holds quota until deleted" in r.out

    log = Path(os.environ["XDG_STATE_HOME"]) / "tpuctl" / "gc.log"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(e["node"] for e in entries) == ["old", "spotty"]
    assert all(e["result"] == "deleted" and e["project"] == "tpuctl-demo" for e in entries)
    assert cli("delete", "young", "--zone", Z, "--yes").code == 0


def test_unmanaged_and_kept_nodes_are_never_touched(cli, emulator) -> None:
    past = str(int(time.time()) - 3600)
    # Looks expired and preempted, but tpuctl did not create it.
    foreign_node(emulator, "theirs", {"tpuctl-expires": past, "tpuctl-owner": "root"}, spot=True)
    emulator.preempt(f"{PARENT}/nodes/theirs")
    assert cli("create", "precious", "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
    assert cli("keep", "precious", "--zone", Z).code == 0
    expire(emulator, "precious")

    r = cli("gc", "--yes", "--all-owners", "--idle", "1s")
    assert r.code == 0, r.err
    assert names(emulator) == ["precious", "theirs"]
    assert "keep precious (us-central1-a): kept (tpuctl-keep=true)" in r.err
    assert "theirs" not in r.out + r.err

    assert cli("keep", "precious", "--off", "--zone", Z).code == 0
    assert cli("gc", "--yes").code == 0
    assert names(emulator) == ["theirs"]
    emulator.tpu_client().delete_node(name=f"{PARENT}/nodes/theirs").result()


def test_other_owners_only_with_flags(cli, emulator) -> None:
    managed = {
        "managed-by": "tpuctl",
        "tpuctl-owner": "alice",
        "tpuctl-expires": str(int(time.time()) - 60),
    }
    foreign_node(emulator, "alices", managed)
    assert cli("gc", "--yes").code == 0
    assert names(emulator) == ["alices"]
    assert cli("gc", "--yes", "--owner", "bob").code == 0
    assert names(emulator) == ["alices"]
    r = cli("gc", "--yes", "--owner", "alice", "--json")
    assert r.code == 0
    (row,) = json.loads(r.out)
    assert row["name"] == "alices" and row["deleted"] is True and row["action"] == "delete"
    assert names(emulator) == []


def test_dry_run_and_cron_without_yes_delete_nothing(cli, emulator) -> None:
    assert cli("create", "dry", "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
    expire(emulator, "dry")
    r = cli("gc", "--dry-run")
    assert r.code == 0
    assert "would delete dry" in r.err
    r = cli("gc")  # no terminal, no --yes: a cron line that forgot --yes
    assert r.code == 2
    assert "would delete dry" in r.err  # says what it would have done
    assert "error: deleting nothing: 1 resource(s) to collect but no --yes" in r.err
    assert "Traceback" not in r.err
    r = cli("gc", tty=True, stdin="n\n")
    assert r.code == 1
    assert names(emulator) == ["dry"]
    r = cli("gc", tty=True, stdin="y\n")
    assert r.code == 0
    assert names(emulator) == []


def quiet_node(cli, emulator, name: str) -> None:  # noqa: ANN001
    """A node whose labels say it has been idle for an hour (no watchdog of its own)."""
    assert cli("create", name, "-a", "v3-8", "--zone", Z).code == 0
    set_label(emulator, name, "tpuctl-last-active", str(int(time.time()) - 3600))


def test_an_idle_node_confirmed_idle_on_the_node_is_collected(cli, emulator) -> None:
    quiet_node(cli, emulator, "quiet")
    r = cli("list", "--zone", Z)
    assert r.out.splitlines()[1].split()[-2:] == ["1h", "-"]  # IDLE, EXPIRES (none)
    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert "deleted quiet (us-central1-a, v3-8): idle for 1h (limit 30m): no job, session" in r.out
    assert names(emulator) == []


def test_a_node_whose_device_is_held_is_kept_with_the_reason(
    emulator_server, cli, emulator
) -> None:
    procs = mine(emulator_server)
    quiet_node(cli, emulator, "holding")
    hold = 'setsid sleep 600 < "${TPUCTL_TPU_DEVICES%%,*}" > /dev/null 2>&1 & echo $!'
    r = cli("ssh", "holding", "--zone", Z, "--command", hold)
    assert r.code == 0, r.err
    holder = int(r.out.split()[-1])  # as its worker numbers it
    assert holder in inner_pids(procs())

    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert names(emulator) == ["holding"]
    assert "keep holding (us-central1-a): labels say idle for 1h, but busy on the node" in r.err
    assert f"worker 0: pid {holder} (sleep 600) holds " in r.err

    assert cli("ssh", "holding", "--zone", Z, "--command", f"kill -9 {holder}").code == 0
    wait_until(lambda: holder not in inner_pids(procs()), "the holder to go")
    assert cli("gc", "--yes", "--idle", "30m").code == 0
    assert names(emulator) == []
    wait_until(lambda: mine(emulator_server, holders=True)() == [], "no process left")


def test_an_unreachable_node_is_not_confirmed_idle(cli, emulator, tmp_path: Path) -> None:
    quiet_node(cli, emulator, "silent")
    # Its worker now answers with another host key than it publishes: tpuctl will not talk
    # to it, so it cannot look inside.
    emulator.set_guest_attributes(f"{PARENT}/nodes/silent", 0, other_host_keys())
    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert "keep silent (us-central1-a): labels say idle for 1h; not confirmed (worker 0 (" in r.err
    assert "presented an SSH host key that is not the one the cloud publishes" in r.err
    assert names(emulator) == ["silent"]
    assert cli("delete", "silent", "--zone", Z, "--yes").code == 0


def test_two_concurrent_gc_runs_both_succeed(cli, emulator) -> None:
    for name in ("c1", "c2", "c3"):
        assert cli("create", name, "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
        expire(emulator, name)
    emulator.config(durations={"delete": 0.5})
    cmd = [sys.executable, "-m", "tpuctl", "gc", "--yes"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=60), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert [code for code, _ in results] == [0, 0], results
    assert names(emulator) == []


def test_a_failed_deletion_is_reported_by_name(cli, emulator) -> None:
    assert cli("create", "stuck", "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
    expire(emulator, "stuck")
    # Every call naming this node is refused as over quota (never retried).
    emulator.faults(rate=1.0, codes=[429], quota=True, paths="nodes/stuck")
    r = cli("gc", "--yes")
    emulator.faults(rate=0)
    assert r.code == 1
    assert "could not delete stuck" in one_line_error(r)
    assert "FAILED to delete stuck" in r.out
    assert cli("delete", "stuck", "--zone", Z, "--yes").code == 0


def test_bad_flags(cli) -> None:
    r = cli("gc", "--idle", "soon")
    assert r.code == 2
    assert "invalid --idle 'soon'" in one_line_error(r)
    r = cli("gc", "--owner", "a", "--all-owners")
    assert r.code == 2
    r = cli("create", "x", "-a", "v3-8", "--zone", Z, "--ttl", "0s")
    assert r.code == 2
    assert "must be more than zero" in one_line_error(r)


def _gc_at_its_prompt() -> pexpect.spawn:
    """`tpuctl gc` on a terminal, stopped at its question (the plan is made)."""
    env = {**os.environ, "TERM": "dumb", "COLUMNS": "200"}
    child = pexpect.spawn(
        sys.executable, ["-m", "tpuctl", "gc", "--zone", Z], env=env, encoding="utf-8", timeout=60
    )
    child.expect(r"Delete 1 resource\(s\)\? \[y/N\]: ")
    return child


def _answer_yes(child: pexpect.spawn) -> str:
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


def test_gc_leaves_a_node_kept_while_it_asked(cli, emulator) -> None:
    assert cli("create", "late", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    expire(emulator, "late")
    child = _gc_at_its_prompt()
    assert cli("keep", "late", "--zone", Z).code == 0  # a colleague keeps it meanwhile
    out = _answer_yes(child)
    assert "skipped late (us-central1-a): kept (tpuctl-keep=true) since gc looked" in out
    assert names(emulator) == ["late"]
    assert cli("delete", "late", "--zone", Z, "--yes").code == 0


def test_gc_never_deletes_a_new_node_that_took_the_name(cli, emulator) -> None:
    assert cli("create", "reborn", "-a", "v3-8", "--zone", Z, "--ttl", "8h").code == 0
    expire(emulator, "reborn")
    child = _gc_at_its_prompt()
    assert cli("delete", "reborn", "--zone", Z, "--yes").code == 0
    assert cli("create", "reborn", "-a", "v3-8", "--zone", Z, "--ttl", "1s").code == 0
    expire(emulator, "reborn")  # expired too: only its identity differs
    out = _answer_yes(child)
    assert "skipped reborn (us-central1-a): a new node of that name was created" in out
    assert names(emulator) == ["reborn"]
    assert cli("delete", "reborn", "--zone", Z, "--yes").code == 0


def test_a_node_not_yet_idle_for_the_limit_is_told_as_the_metrics_know_it(cli, emulator) -> None:
    """A node that never ran anything: its TensorCores have been idle for less than --idle;
    gc says for how long at the last sample and how old that is, never that they were
    active (the metric cannot tell)."""
    assert cli("create", "fresh", "-a", "v3-8", "--zone", Z).code == 0
    try:
        emulator.sample()
        r = cli("gc", "--dry-run", "--idle", "1h")
        assert r.code == 0, r.err
        line = next(ln for ln in r.err.splitlines() if ln.startswith("keep fresh"))
        assert line.startswith("keep fresh (us-central1-a): TensorCores idle for ")
        assert " at the last sample (" in line
        assert line.endswith("under the limit of 1h (evidence: metrics)")
        assert "active" not in line
    finally:
        assert cli("delete", "fresh", "--zone", Z, "--yes").code == 0


def test_a_metrics_point_older_than_the_limit_is_no_evidence_the_node_is_probed(
    cli, emulator
) -> None:
    """A point that says "idle 0s" (or any busy) older than --idle says nothing of the
    time since: gc probes the node as it does one with no point, and deletes it idle."""
    quiet_node(cli, emulator, "stale")
    r = cli("ssh", "stale", "--zone", Z, "--command", 'touch "${TPUCTL_TPU_DEVICES%%,*}"')
    assert r.code == 0, r.err
    emulator.sample()  # its TensorCores idle for about 0s now
    sampled = time.time()
    r = cli("gc", "--dry-run", "--idle", "1h")
    assert "keep stale (us-central1-a): TensorCores idle for 0s at the last sample" in r.err
    wait_until(lambda: time.time() - sampled > 3, "the point to be older than 2s")
    r = cli("gc", "--yes", "--idle", "2s")
    assert r.code == 0, r.err
    assert "deleted stale (us-central1-a, v3-8): idle for 1h (limit 2s): no job" in r.out
    assert names(emulator) == []


def test_owner_is_the_account_not_the_login_name(cli, emulator) -> None:
    """A node tpuctl made as another account, whose machine's login name is the same as
    this one's, is not this account's: gc leaves it unless --all-owners."""
    from tpuctl.services.names import local_user, owner_label

    emulator.config(caller="ada@example.com")
    assert cli("create", "adas", "-a", "v3-8", "--zone", Z, "--ttl", "1h").code == 0
    labels = emulator.tpu_client().get_node(name=f"{PARENT}/nodes/adas").labels
    assert labels["tpuctl-owner"] == owner_label("ada@example.com")
    assert labels["tpuctl-owner"].startswith("ada-example-com-")
    expire(emulator, "adas")
    managed = {"managed-by": "tpuctl", "tpuctl-owner": local_user(), "tpuctl-expires": "1"}
    foreign_node(emulator, "same-login", managed)  # another account, same login name

    emulator.config(caller="bob@example.com")
    r = cli("gc", "--dry-run", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == []
    r = cli("gc", "--dry-run", "--owner", "ada@example.com", "--json")
    assert [row["name"] for row in json.loads(r.out)] == ["adas"]
    r = cli("gc", "--dry-run", "--all-owners", "--json")
    assert sorted(row["name"] for row in json.loads(r.out)) == ["adas", "same-login"]
    r = cli("keep", "adas", "--zone", Z)  # nor may bob keep ada's node from her gc
    assert r.code == 2 and "node adas is another account's" in one_line_error(r)
    assert cli("keep", "adas", "--zone", Z, "--all-owners").code == 0
    assert cli("keep", "adas", "--zone", Z, "--off", "--all-owners").code == 0

    emulator.config(caller="ada@example.com")
    r = cli("gc", "--yes")
    assert r.code == 0, r.err
    assert names(emulator) == ["same-login"]
    emulator.tpu_client().delete_node(name=f"{PARENT}/nodes/same-login").result()
