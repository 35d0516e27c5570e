"""A preemption's notice: the guest sees `instance/preempted` TRUE and its processes get
SIGTERM while the node still answers READY; at the end of the notice it is PREEMPTED."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.ssh_helpers import create, delete, user_key, wait_until
from tests.emulator.test_ssh_workers import run
from tpuctl.emulator.control.client import ControlError


def _get(url: str) -> tuple[int, str, str]:
    req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("ETag", ""), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, "", exc.read().decode()


def _metadata(emulator: Any, node: Any, worker: int = 0) -> str:
    zone = node.name.split("/")[3]
    node_id = node.name.rsplit("/", 1)[-1]
    return (
        f"http://{emulator.address}/_emulator/v1/metadata/tpuctl-demo/{zone}/{node_id}/"
        f"{worker}/computeMetadata/v1/instance"
    )


def _state(emulator: Any, node: Any) -> str:
    return str(next(n for n in emulator.nodes() if n["name"] == node.name)["state"])


def test_the_notice_is_watched_through_wait_for_change_then_the_node_is_preempted(
    emulator,
) -> None:
    node = create(emulator, "spotty", "v3-8", scheduling_config={"spot": True})
    base = _metadata(emulator, node)
    status, etag, value = _get(f"{base}/preempted")
    assert (status, value) == (200, "FALSE") and etag
    assert _get(f"{base}/maintenance-event")[2] == "NONE"
    # an old ETag answers at once; a timeout answers the unchanged value
    assert _get(f"{base}/preempted?wait_for_change=true&last_etag=0")[2] == "FALSE"
    assert _get(f"{base}/preempted?wait_for_change=true&timeout_sec=0.2")[2] == "FALSE"
    assert _get(f"{base}/preempted?wait_for_change=true&timeout_sec=x")[0] == 400

    answered: list[tuple[int, str, str]] = []
    waiting = threading.Thread(
        target=lambda: answered.append(
            _get(f"{base}/preempted?wait_for_change=true&last_etag={etag}&timeout_sec=60")
        )
    )
    waiting.start()
    emulator.preempt(node.name, notice=600)
    waiting.join(timeout=30)
    assert answered and answered[0][0] == 200 and answered[0][2] == "TRUE"
    assert answered[0][1] != etag
    # During the notice the node still answers READY, and refuses anything but a delete.
    assert _state(emulator, node) == "READY"
    with pytest.raises(ControlError, match="not READY"):
        emulator.preempt(node.name)
    with pytest.raises(Exception, match="can be stopped"):
        emulator.tpu_client().stop_node(request={"name": node.name}).result()
    emulator.advance(node.name)  # the notice runs out
    assert _state(emulator, node) == "PREEMPTED"
    assert _get(f"{base}/preempted")[2] == "TRUE"
    delete(emulator, node.name)


def test_the_notice_sends_sigterm_to_the_workers_processes(
    emulator_server, emulator, tmp_path: Path
) -> None:
    pub, key = user_key(tmp_path)
    node = create(
        emulator,
        "notice",
        "v3-8",
        scheduling_config={"spot": True},
        metadata={"ssh-keys": f"alice:{pub}"},
    )
    script = (
        "ask() { python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request("
        'os.environ["TPUCTL_METADATA_URL"] + "/instance/preempted", headers='
        '{"Metadata-Flavor": "Google"})).read().decode())\'; }; '
        "trap 'echo \"TERM while $(ask)\"; exit 7' TERM; "
        "touch $HOME/up; while :; do sleep 0.05; done"
    )
    result: list[Any] = []
    session = threading.Thread(
        target=lambda: result.append(run(emulator, tmp_path, node, 0, "alice", key, script))
    )
    session.start()
    home = Path(emulator_server.backend.worker_env(node.name, 0)["HOME"])
    wait_until(lambda: (home / "up").exists(), "the process to start")
    emulator.preempt(node.name, notice=600)
    session.join(timeout=30)
    assert result, "the session did not end on SIGTERM"
    assert result[0].exit_status == 7
    assert result[0].stdout.decode().strip() == "TERM while TRUE"
    assert _state(emulator, node) == "READY"  # the notice has not run out
    emulator.advance(node.name)
    assert _state(emulator, node) == "PREEMPTED"
    delete(emulator, node.name)


def test_a_bad_notice_is_refused(emulator) -> None:
    node = create(emulator, "bad", "v3-8", scheduling_config={"spot": True})
    for notice in (-1, "soon", 10**9):
        with pytest.raises(ControlError, match="notice must be seconds"):
            emulator.preempt(node.name, notice=notice)
    assert _state(emulator, node) == "READY"
    delete(emulator, node.name)
