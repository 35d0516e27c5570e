"""The bundle's `checkup` on a pretend worker: holders busy or idle, and `--stop` only
for a process that still holds a TPU device."""

from __future__ import annotations

import json
import subprocess

from tests.agent.conftest import AGENT_PYTHON, checked
from tests.agent.test_idle import Worker, worker  # noqa: F401 - the fixture


def _checkup(w: Worker, *args: str) -> dict:  # type: ignore[type-arg]
    env = dict(w.env(), TPUCTL_IDLE_SCOPE=w.scope, TPUCTL_METADATA_URL="http://127.0.0.1:9")
    done = subprocess.run(
        checked(w.bundle, "checkup", *args),
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    (line,) = done.stdout.splitlines()
    return dict(json.loads(line))


def test_holders_are_named_busy_or_idle(worker: Worker) -> None:  # noqa: F811
    with worker.device.open("rb") as device:
        idle = worker.start(["sleep", "600"], stdin=device)
        busy = worker.start([AGENT_PYTHON, "-c", "while True: pass"], stdin=device)
    report = _checkup(worker)
    found = {h["pid"]: h for h in report["holders"]}
    assert set(found) == {idle.pid, busy.pid}
    assert found[idle.pid]["busy"] is False and found[busy.pid]["busy"] is True
    assert found[idle.pid]["devices"] == [str(worker.device)]
    assert found[idle.pid]["started"] > 0 and found[idle.pid]["command"] == "sleep 600"
    assert str(worker.device) in report["devices"]
    assert report["storage"] == [] and report["memory"]["total"] > 0


def test_stop_only_stops_a_holder(worker: Worker) -> None:  # noqa: F811
    bystander = worker.start(["sleep", "600"], stdin=subprocess.DEVNULL)
    with worker.device.open("rb") as device:
        holder = worker.start(["sleep", "600"], stdin=device)
    report = _checkup(worker, "--stop", str(bystander.pid), "--stop", str(holder.pid))
    assert report["fixed"] == [
        f"pid {bystander.pid} holds no TPU device (any more): left alone",
        f"stopped pid {holder.pid} (SIGTERM)",
    ]
    assert bystander.poll() is None
    assert holder.wait(timeout=10) != 0
    assert report["holders"] == []


def test_storages_refusal_is_said_in_its_own_words() -> None:
    from tpuctl.agent.checkup import _said
    from tpuctl.agent.net import HttpError

    said = "sa@p.iam.gserviceaccount.com does not have storage.objects.list access to the bucket."
    body = json.dumps({"error": {"code": 403, "message": said}})
    assert _said(HttpError(403, body)) == (
        "HTTP 403: sa@p.iam.gserviceaccount.com does not have storage.objects.list access "
        "to the bucket."
    )
    assert _said(HttpError(0, "GET http://x: timed out\n")) == "HTTP 0: GET http://x: timed out"
