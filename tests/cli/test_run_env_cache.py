"""The environment cache on a slice, across a preemption, and when the cache is damaged:
one resolution per key, installs from the bucket only, a corrupt or partial entry rebuilt."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cli.conftest import one_line_error
from tests.cli.env_index import Index
from tests.cli.test_run import _node_name, _running, wait_for
from tests.cli.test_run_compute import _kinds
from tests.cli.test_run_env import env_objects, index, project, run

__all__ = ["index", "project"]  # the fixtures, shared

BUCKET = "tpuctl-demo-tpuctl"


def resolutions(index: Index) -> int:
    """How many times pip asked the index for the top requirement's page."""
    with index.lock:
        return sum(1 for path in index.requests if path.rstrip("/") == "/simple/tinya")


def test_a_slice_resolves_once_and_every_worker_installs_from_the_bucket(
    cli, emulator, project, index
) -> None:
    r = run(
        cli, project, index, "-a", "v3-128", "--requirements", str(project / "requirements.txt")
    )
    assert r.code == 0, r.err
    for w in range(16):
        assert f"[w{w}] worker {w} value 42" in r.out
    assert "built on 1 worker(s), from the bucket on 15 worker(s)" in r.err
    assert re.search(
        r"\(build: resolve \d+\.\ds, upload \d+\.\ds, install \d+\.\ds; "
        r"slowest from the bucket: fetch \d+\.\ds, install \d+\.\ds\)",
        r.err,
    ), r.err
    assert resolutions(index) == 1, index.requests
    downloads = [p for p in index.requests if p.startswith("/files/")]
    assert len(downloads) == 2  # each wheel once, whatever the worker count


def test_a_compute_engine_slice_resolves_once_and_every_vm_installs_from_the_bucket(
    cli, emulator, project, index
) -> None:
    # a v6e-16 on Compute Engine: a workload policy, a template and a group of 4 VMs
    r = run(cli, project, index, "-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d")
    assert r.code == 0, r.err
    for w in range(4):
        assert f"[w{w}] worker {w} value 42" in r.out
    assert "built on 1 worker(s), from the bucket on 3 worker(s)" in r.err
    assert resolutions(index) == 1, index.requests
    assert _kinds(emulator) == []  # the group, its VMs, template and policy: all gone


def test_a_preemption_recovery_installs_from_the_bucket(emulator_server, emulator, project, index):
    (project / "job.py").write_text(
        "import os, time, tinya\n"
        "print('value', tinya.value(), 'attempt', os.environ['TPUCTL_ATTEMPT'], flush=True)\n"
        "if os.environ['TPUCTL_RESTART'] == '0':\n    time.sleep(600)\n"
    )
    root = emulator_server.backend.workers.root
    with _running(
        project / "job.py", "--spot", "--restarts", "1", "--env", f"PIP_INDEX_URL={index.url}"
    ) as proc:
        name = _node_name(emulator)
        wait_for(
            lambda: any(
                "value 42 attempt 1" in log.read_text(errors="replace")
                for log in root.glob("*/w0/home/.tpuctl/jobs/*/attempt-1.log")
            )
        )
        asked = index.count()
        emulator.preempt(name)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    after = out.split("=== tpuctl: attempt 2")[1]
    assert "value 42 attempt 2" in after
    assert "from the bucket" in after  # a new VM: the wheels came from the bucket
    assert index.count() == asked  # ... and the index was not asked again
    assert emulator.nodes() == []


def _blobs(emulator) -> list:  # noqa: ANN001
    return list(emulator.storage_client().list_blobs(BUCKET, prefix="tpuctl/envs/"))


def test_a_corrupt_wheel_in_the_cache_is_detected_and_rebuilt(cli, emulator, project, index):
    assert run(cli, project, index).code == 0
    asked = index.count()
    (wheel,) = [b for b in _blobs(emulator) if "/tinyb-" in b.name]
    wheel.upload_from_string(b"not the wheel")  # rewritten behind the index's back
    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert "the cached entry is corrupt" in r.out and "rebuilding it" in r.out
    assert "worker 0 value 42" in r.out
    assert index.count() > asked  # rebuilt from the index
    third = index.count()
    assert run(cli, project, index).code == 0  # ...and whole again: from the bucket
    assert index.count() == third


def _indexes(emulator) -> list:  # noqa: ANN001
    """The entry's index objects: its index, and the builds of the jobs that built it."""
    return [b for b in _blobs(emulator) if b.name.endswith("/index.json") or "/built/" in b.name]


def test_an_entry_without_its_index_is_rebuilt(cli, emulator, project, index) -> None:
    assert run(cli, project, index).code == 0
    asked = index.count()
    for entry in _indexes(emulator):  # a builder that died: wheels, and no index
        entry.delete()
    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert "built on 1 worker(s)" in r.err
    assert index.count() > asked


def test_rebuild_env_resolves_again(cli, emulator, project, index) -> None:
    assert run(cli, project, index).code == 0
    asked = resolutions(index)
    r = run(cli, project, index, "-a", "v3-32", "--rebuild-env")
    assert r.code == 0, r.err
    assert resolutions(index) == asked + 1  # once more, not once per worker
    assert "built on 1 worker(s), from the bucket on 3 worker(s)" in r.err
    (entry,) = [json.loads(v) for k, v in env_objects(emulator).items() if k.endswith("index.json")]
    assert entry["worker"] == 0


def test_a_resolution_failure_is_one_line_naming_package_and_index(
    cli, emulator, project, index
) -> None:
    (project / "requirements.txt").write_text("tinya\nnosuch==1.0\n")
    r = run(cli, project, index, "-a", "v3-32")
    assert r.code == 1, r.err
    line = one_line_error(r, after_call=True)
    host = index.url.rsplit("/", 1)[0]  # its host: the rest of an index URL is never shown
    said = f" FAILED: environment: no version of nosuch==1.0 found on {host}/…"
    assert re.fullmatch(f"error: w[0-3]{re.escape(said)}", line), line  # once: by its builder
    assert index.requests.count("/simple/nosuch/") == 1  # one resolution, not four
    assert "value" not in r.out  # no script ran anywhere
    assert emulator.nodes() == []
    # the failure is this job's: the next job tries again (and, fixed, succeeds)
    (project / "requirements.txt").write_text("tinya\n")
    assert run(cli, project, index).code == 0


def test_bad_requirements_are_usage_errors(cli, emulator, project: Path, index) -> None:
    r = run(cli, project, index, "--requirements", str(project / "missing.txt"))
    assert r.code == 2 and "missing.txt: no such file" in one_line_error(r)
    (project / "requirements.txt").write_text("-r other.txt\n")
    r = run(cli, project, index)
    assert r.code == 2 and "-r, -c and -e are not supported" in one_line_error(r)
    (project / "requirements.txt").write_text("--extra-index-url https://me:pw@example.com/s\n")
    r = run(cli, project, index)
    assert r.code == 2 and "PIP_INDEX_URL" in one_line_error(r)
    r = run(cli, project, index, "--no-requirements", "--requirements", "x.txt")
    assert r.code == 2 and "exclusive" in one_line_error(r)
    r = run(cli, project, index, "--no-requirements", "--rebuild-env")
    assert r.code == 2 and "--rebuild-env needs requirements" in one_line_error(r)
    assert emulator.nodes() == [] and index.count() == 0


def test_two_jobs_of_the_same_requirements_at_once_build_it_at_most_once_each(
    emulator, project, index
) -> None:
    # Neither client has vouched for the other's build yet (vouching.py): a job that
    # waited for the other's build finds it not vouched for and builds its own, once.
    flags = ("-a", "v3-32", "--env", f"PIP_INDEX_URL={index.url}")
    with (
        _running(project / "job.py", *flags) as one,
        _running(project / "job.py", *flags) as two,
        ThreadPoolExecutor(2) as pool,  # both read at once: neither blocks on a pipe
    ):
        outs = list(pool.map(lambda p: p.communicate(timeout=300), (one, two)))
    assert one.returncode == 0 and two.returncode == 0, outs
    builds = sum(err.count("built on 1 worker(s)") for _, err in outs)
    assert builds in (1, 2) and resolutions(index) == builds, index.requests  # 1: no overlap
    assert not any(re.search(r"built on [2-9]", err) for _, err in outs)  # once a job
    assert emulator.nodes() == []


def test_a_dead_builders_lock_is_taken_over(cli, emulator, project, index, monkeypatch):
    assert run(cli, project, index).code == 0
    (entry,) = [b for b in _blobs(emulator) if b.name.endswith("/index.json")]
    lock = entry.name.replace("index.json", "lock.json")
    for made in _indexes(emulator):  # a builder that died: its lock stays, and no index
        made.delete()
    entry.bucket.blob(lock).upload_from_string(json.dumps({"job": "x", "worker": 3}))
    monkeypatch.setenv("TPUCTL_ENV_LOCK_STALE", "2")  # the agents' deadline, seen on their clock
    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert "worker 3 builds it; waiting for its index" in r.out
    assert "its builder's lock has not changed for 2s: taking over" in r.out
    assert "worker 0 value 42" in r.out and "built on 1 worker(s)" in r.err


def test_a_wrong_setting_in_the_vms_environment_is_said_and_its_default_used(
    cli, emulator, project, index, monkeypatch
) -> None:
    monkeypatch.setenv("TPUCTL_ENV_KEEP_DAYS", "two")  # the image's environment, not --env
    monkeypatch.setenv("TPUCTL_ENV_LOCK_STALE", "-5")
    r = run(cli, project, index)
    assert r.code == 0, r.err
    assert "TPUCTL_ENV_KEEP_DAYS='two' is not a positive number of days: 14 used" in r.out
    assert "TPUCTL_ENV_LOCK_STALE='-5' is not a positive number of seconds: 120 used" in r.out
    assert "worker 0 value 42" in r.out
