"""tpuctl doctor NODE against the emulator: each check fails on the fault the emulator
plants (worker-fault, node-state) and passes without it; --fix repairs what is safe."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

NODE = "projects/tpuctl-demo/locations/us-central1-a/nodes/{}"
TF = "tpu-vm-tf-2.16.0-pjrt"


def with_libtpu(emulator, name: str, workers: int = 1) -> None:  # noqa: ANN001
    """An emulated VM's python3 is the suite's, which has jax (a dev dependency, for the
    tests of `tpuctl profile`): a sound VM with jax also has libtpu (`pip install
    "jax[tpu]"` brings it), so each worker's image gets libtpu's metadata."""
    for worker in range(workers):
        emulator.worker_fault(name, "package", worker=worker, package="libtpu", version="0.0.21")


@pytest.fixture
def node(cli, emulator) -> Iterator[str]:  # noqa: ANN001
    assert cli("create", "doc", "-a", "v3-8", "--version", TF).code == 0
    with_libtpu(emulator, NODE.format("doc"))
    yield "doc"
    assert cli("delete", "doc", "--yes").code == 0


def _checks(out: str) -> dict[str, list[dict]]:  # type: ignore[type-arg]
    report = json.loads(out)
    found: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for c in report["checks"]:
        found.setdefault(c["check"], []).append(c)
    return found


def _status(checks: dict[str, list[dict]], name: str) -> set[str]:  # type: ignore[type-arg]
    return {c["status"] for c in checks[name]}


def test_a_sound_node_passes_every_check(cli, node) -> None:  # noqa: ANN001
    r = cli("doctor", node, "--json")
    assert r.code == 0, r.out + r.err
    checks = _checks(r.out)
    for name in ("node-state", "ssh", "tpu-devices", "libtpu-lockfile", "tpu-holder",
                 "framework", "disk", "memory"):  # fmt: skip
        assert _status(checks, name) == {"pass"}, checks[name]
    assert "tensorflow 2.16.0" in checks["framework"][0]["evidence"]
    assert checks["last-job"][0]["status"] == "skip"
    text = cli("doctor", node)
    assert text.code == 0 and "PASS  node-state" in text.out and "0 fail" in text.out


def test_an_unhealthy_node_fails_its_state_check(cli, emulator, node) -> None:  # noqa: ANN001
    emulator.set_node_state(
        NODE.format(node), health="UNHEALTHY_TENSORFLOW",
        symptoms=[{"symptomType": "OUT_OF_MEMORY", "details": "oom on chip 0"}],
    )  # fmt: skip
    r = cli("doctor", node)
    assert r.code == 1
    assert "FAIL  node-state       the node is unhealthy (UNHEALTHY_TENSORFLOW)" in r.out
    assert "symptom OUT_OF_MEMORY: oom on chip 0" in r.out
    emulator.set_node_state(NODE.format(node), state="STOPPED", health="", symptoms=[])
    r = cli("doctor", node, "--json")
    checks = _checks(r.out)
    assert r.code == 1 and _status(checks, "node-state") == {"fail"}
    assert _status(checks, "ssh") == {"skip"}
    assert "tpuctl start doc" in checks["node-state"][0]["fix"]


def test_a_stale_lockfile_fails_and_fix_removes_it(cli, emulator, node) -> None:  # noqa: ANN001
    emulator.worker_fault(NODE.format(node), "stale-lockfile")
    r = cli("doctor", node)
    assert r.code == 1
    assert "FAIL  libtpu-lockfile  w0: a stale /tmp/libtpu_lockfile" in r.out
    r = cli("doctor", node, "--fix", "--json")
    assert r.code == 0, r.out
    lock = _checks(r.out)["libtpu-lockfile"][0]
    assert lock["status"] == "pass" and "removed the stale /tmp/libtpu_lockfile" in lock["summary"]
    assert cli("doctor", node).code == 0


def test_an_idle_holder_of_the_tpu_is_named_and_stopped_only_when_agreed(  # noqa: ANN001
    cli, emulator, node
) -> None:
    emulator.worker_fault(NODE.format(node), "tpu-held")
    emulator.worker_fault(NODE.format(node), "stale-lockfile")
    r = cli("doctor", node, "--json")
    checks = _checks(r.out)
    assert r.code == 1
    (holder,) = checks["tpu-holder"]
    assert holder["status"] == "fail" and "1 idle" in holder["summary"]
    assert "idle" in holder["evidence"][0] and "accel0" in holder["evidence"][0]
    # idle by its CPU, and Monitoring has no point to say otherwise (none sampled)
    assert "; TensorCores: no recent Monitoring point)" in holder["evidence"][0]
    # held by a live process: the lockfile is not stale, and --fix leaves it
    assert _status(checks, "libtpu-lockfile") == {"pass"}
    r = cli("doctor", node, "--fix")  # no terminal, no --yes: not asked, not done
    assert r.code == 1 and "not done (no terminal to ask; --yes agrees): stop pid" in r.err
    r = cli("doctor", node, "--fix", "--yes", "--json")
    checks = _checks(r.out)
    assert _status(checks, "tpu-holder") == {"pass"}
    assert any("stopped pid" in e for e in checks["tpu-holder"][0]["evidence"])
    # its owner gone, the lockfile is stale now: the next --fix removes it
    assert _status(checks, "libtpu-lockfile") == {"fail"}
    assert cli("doctor", node, "--fix").code == 0


def test_a_holder_waiting_on_its_tpu_is_busy_by_its_tensorcores(cli, emulator, node) -> None:  # noqa: ANN001
    """A training process uses little CPU while its TPU works: Cloud Monitoring's
    TensorCore idle time decides, and such a holder is not called idle."""
    emulator.worker_fault(NODE.format(node), "tpu-busy")
    emulator.sample()  # the device was written before the fault answered: a busy point
    r = cli("doctor", node, "--json")
    (holder,) = _checks(r.out)["tpu-holder"]
    assert holder["status"] == "warn" and "idle" not in holder["summary"]
    assert " busy (" in holder["evidence"][0]
    assert "; TensorCores idle for 0s)" in holder["evidence"][0]


def test_a_full_disk_fails(cli, emulator, node) -> None:  # noqa: ANN001
    emulator.worker_fault(NODE.format(node), "disk-full")
    r = cli("doctor", node, "--json")
    checks = _checks(r.out)
    assert r.code == 1 and "fail" in _status(checks, "disk")
    assert any(c["summary"] == "the disk is full at /" for c in checks["disk"])


def test_a_missing_or_replaced_framework_fails(cli, emulator, node) -> None:  # noqa: ANN001
    emulator.worker_fault(NODE.format(node), "package", package="tensorflow", version="2.15.0")
    r = cli("doctor", node, "--json")
    (fw,) = _checks(r.out)["framework"]
    assert r.code == 1
    assert fw["summary"] == f"{TF} carries tensorflow 2.16.0, but 2.15.0 is installed"
    emulator.worker_fault(NODE.format(node), "package", package="tensorflow", version=None)
    (fw,) = _checks(cli("doctor", node, "--json").out)["framework"]
    assert fw["summary"] == f"{TF} carries tensorflow 2.16.0, but it is not installed"


def test_storage_paths_are_checked_from_the_vm(cli, emulator, node) -> None:  # noqa: ANN001
    emulator.storage_client().create_bucket("doc-data").blob("train/a.txt").upload_from_string("x")
    r = cli("doctor", node, "--path", "gs://doc-data/train/", "--path", "gs://doc-missing/x",
            "--json")  # fmt: skip
    storage = {c["summary"]: c for c in _checks(r.out)["storage"]}
    assert r.code == 1
    assert storage["the service account can read gs://doc-data/train/"]["status"] == "pass"
    missing = storage["the service account cannot read gs://doc-missing/x (HTTP 404)"]
    assert missing["status"] == "fail" and "does not exist" in missing["fix"]


def test_a_node_or_a_script_is_told_apart(cli, emulator, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train").write_text("print(1)\n")
    r = cli("doctor", "train")
    assert r.code == 2 and "is a file here and could be a node name too" in r.err
    assert "./train" in r.err and "--node train" in r.err
    r = cli("doctor", "Not_A_Node")
    assert r.code == 2 and "is neither a file nor a node name" in r.err
    r = cli("doctor", "absent-node")
    assert r.code == 4, r.err
    r = cli("doctor", "--node", "train")
    assert r.code == 4


def test_the_last_job_and_the_tail_of_its_log(cli, emulator, tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('epoch 1: loss 0.5')\nsys.exit('diverged')\n")
    r = cli("run", str(script), "-a", "v3-8", "--name", "last", "--keep", "--no-check")
    assert r.code != 0
    try:
        (name,) = [n["name"].rsplit("/", 1)[1] for n in emulator.nodes()]
        r = cli("doctor", name)
        assert "WARN  last-job" in r.out and "ended FAILED" in r.out
        assert "log tail: w0: epoch 1: loss 0.5" in r.out
        assert "log tail: w0: diverged" in r.out
        assert "PASS  storage" in r.out and "can write to gs://" in r.out
    finally:
        for n in emulator.nodes():
            assert cli("delete", n["name"].rsplit("/", 1)[1], "--yes").code == 0


def test_unpublished_host_keys_fail_the_ssh_check(cli, emulator, monkeypatch) -> None:  # noqa: ANN001
    from tpuctl.services.node_doctor import live

    emulator.durations(hostkeys=3600)
    assert cli("create", "nokeys", "-a", "v3-8").code == 0
    try:
        monkeypatch.setattr(live, "TIMEOUT", 1.0)
        r = cli("doctor", "nokeys", "--json")
        (ssh,) = _checks(r.out)["ssh"]
        assert r.code == 1 and ssh["status"] == "fail"
        assert "has not published its SSH host keys" in ssh["summary"]
    finally:
        assert cli("delete", "nokeys", "--yes").code == 0


def test_worker_faults_are_checked_and_packages_are_the_vms(cli, emulator, node) -> None:  # noqa: ANN001
    from tpuctl.emulator.control.client import ControlError

    name = NODE.format(node)
    with pytest.raises(ControlError, match="kind must be one of"):
        emulator.worker_fault(name, "melt")
    with pytest.raises(ControlError, match="worker 3 is out of range"):
        emulator.worker_fault(name, "disk-full", worker=3)
    with pytest.raises(ControlError, match="package is a distribution name"):
        emulator.worker_fault(name, "package", package="../x", version="1")
    done = emulator.worker_fault(name, "package", package="jax", version="0.4.30")
    assert done == {"kind": "package", "worker": 0, "package": "jax", "version": "0.4.30"}
    code = "from importlib import metadata as m; print(m.version('jax'), m.version('tensorflow'))"
    r = cli("exec", node, "--", "python3", "-c", code)
    assert r.code == 0 and r.out.strip().endswith("0.4.30 2.16.0"), r.err
    emulator.set_node_state(name, state="STOPPED")
    with pytest.raises(ControlError, match="not READY"):
        emulator.worker_fault(name, "stale-lockfile")


def test_every_worker_of_a_slice_is_examined(cli, emulator) -> None:  # noqa: ANN001
    assert cli("create", "pod", "-a", "v3-32").code == 0
    try:
        emulator.worker_fault(NODE.format("pod"), "stale-lockfile", worker=2)
        r = cli("doctor", "pod", "--json")
        locks = _checks(r.out)["libtpu-lockfile"]
        assert r.code == 1
        assert {c["worker"]: c["status"] for c in locks} == {
            0: "pass",
            1: "pass",
            2: "fail",
            3: "pass",
        }
        assert len(_checks(r.out)["ssh"]) == 4
    finally:
        assert cli("delete", "pod", "--yes").code == 0
