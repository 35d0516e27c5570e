"""`tpuctl profile JOB`: a real JAX script (CPU) on an emulated two-host slice is traced on
both workers at the same moment, and the traces come home where XProf reads them; a
script without JAX, a job not running and a bad --seconds each get one clear line."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.agent.test_profile import JAX_SCRIPT
from tests.cli.conftest import one_line_error
from tests.cli.test_run import bucket_objects, wait_for

pytestmark = pytest.mark.usefixtures("workers_have_jax")  # JAX runs on the workers

PLAIN_SCRIPT = """\
import threading

print("waiting", flush=True)
threading.Event().wait()
"""


def _run(cli, tmp_path: Path, script: str, accelerator: str) -> str:  # noqa: ANN001
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "main.py").write_text(script)
    flags = ["-a", accelerator, "-z", "us-central2-b", "--detach", "--json", "--no-outputs"]
    r = cli("run", str(tmp_path / "job" / "main.py"), *flags)
    assert r.code == 0, r.err
    return str(json.loads(r.out)["job"])


@pytest.mark.long
def test_a_jax_job_is_profiled_on_every_worker_and_the_traces_come_home(
    cli, emulator, tmp_path: Path
) -> None:
    from jax.profiler import ProfileData

    job = _run(cli, tmp_path, JAX_SCRIPT, "v4-16")
    dest = tmp_path / "home"
    try:
        ready = re.compile(r"^(\[w\d\] )?ready$", re.M)  # each worker's JAX computes
        wait_for(lambda: len(ready.findall(cli("logs", job).out)) == 2, timeout=180)
        r = cli("profile", job, "--seconds", "3", "--dest", str(dest))
        assert r.code == 0, r.err
        assert r.out == f"xprof server --logdir {dest}\n"  # the one command, alone on stdout
        said = re.search(
            r"2 trace\(s\) of 2 worker\(s\) \(jax, 3s, started within ([\d.]+)s\)", r.err
        )
        assert said and float(said.group(1)) < 1.0, r.err
        runs = list((dest / "plugins" / "profile").iterdir())
        assert len(runs) == 1
        traces = sorted(p.name for p in runs[0].iterdir())
        assert traces == ["worker-0.xplane.pb", "worker-1.xplane.pb"]
        for name in traces:  # JAX's own XSpace reader: a whole trace of the host's CPU
            planes = [p.name for p in ProfileData.from_file(str(runs[0] / name)).planes]
            assert "/host:CPU" in planes, (name, planes)
        kept = [k for k in bucket_objects(emulator) if f"jobs/{job}/profile/{runs[0].name}/" in k]
        assert sorted(k.rsplit("/", 1)[1] for k in kept) == traces
        # --json: the same take as one object on stdout, each trace checked at home
        again = cli("profile", job, "--seconds", "1", "--dest", str(tmp_path / "j"), "--json")
        assert again.code == 0, again.err
        took = json.loads(again.out)
        assert took["command"] == f"xprof server --logdir {tmp_path / 'j'}"
        assert (took["job"], took["seconds"], took["refused"]) == (job, 1.0, {})
        assert sorted(t["worker"] for t in took["traces"]) == [0, 1]
        for t in took["traces"]:
            data = Path(t["file"]).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (t["bytes"], t["sha256"])
            assert t["framework"] == "jax" and took["stamp"] in t["file"]
        row = json.loads(cli("jobs", job, "--json").out)
        assert row["state"] == "RUNNING"  # it runs on
        # once in the bucket, the traces left the VMs' disks
        find = f"find ~/.tpuctl/jobs/{job}/profile -name '*.xplane.pb' | wc -l"
        left = cli("exec", row["node"], "-z", "us-central2-b", "--", "sh", "-c", find)
        assert left.code == 0 and sorted(left.out.split()) == ["0", "0", "[w0]", "[w1]"], left
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)
    wait_for(lambda: json.loads(cli("jobs", job, "--json").out)["state"] == "CANCELLED")
    ended = cli("profile", job)
    assert ended.code == 1
    assert f"job {job} runs no setup or script now: there is nothing to profile" in (
        one_line_error(ended)
    )


# one worker per slice: slice 1's is worker 1; on Compute Engine, and on the Cloud TPU API
MULTISLICE = {
    "compute": ("-a", "tpu7x-8", "--zone", "us-central1-c"),
    "tpu": ("-a", "v5litepod-8", "--zone", "us-central1-a"),
}


@pytest.mark.long
@pytest.mark.parametrize("api", sorted(MULTISLICE))
def test_every_slice_of_a_multislice_job_is_profiled_and_its_stacks_taken(
    cli, emulator, tmp_path: Path, api: str
) -> None:
    from jax.profiler import ProfileData

    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "main.py").write_text(JAX_SCRIPT)
    flags = [*MULTISLICE[api], "--slices", "2", "--detach", "--json", "--no-outputs"]
    r = cli("run", str(tmp_path / "job" / "main.py"), *flags)
    assert r.code == 0, r.err
    job = str(json.loads(r.out)["job"])
    try:
        ready = re.compile(r"^(\[s\d/w\d\] )?ready$", re.M)  # each slice's JAX computes
        wait_for(lambda: len(ready.findall(cli("logs", job).out)) == 2, timeout=180)
        took = cli("profile", job, "--seconds", "1", "--dest", str(tmp_path / "p"), "--json")
        assert took.code == 0, took.err
        traces = json.loads(took.out)["traces"]
        assert sorted(t["worker"] for t in traces) == [0, 1]  # slice 0's, slice 1's
        for t in traces:
            assert "/host:CPU" in [p.name for p in ProfileData.from_file(t["file"]).planes]
        stacks = cli("stacks", job)
        assert stacks.code == 0, stacks.err
        assert "s0/w0" in stacks.out and "s1/w0" in stacks.out, stacks.out
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [] and emulator.instances() == [], timeout=120)


@pytest.mark.long
def test_a_script_without_jax_or_tensorflow_is_said_in_one_line(
    cli, emulator, tmp_path: Path
) -> None:
    job = _run(cli, tmp_path, PLAIN_SCRIPT, "v4-8")
    try:
        wait_for(lambda: "waiting" in cli("logs", job).out, timeout=120)
        r = cli("profile", job, "--seconds", "1")
        assert r.code == 1
        assert one_line_error(r, after_call=True) == (
            f"error: no process of job {job} has imported jax or tensorflow: there is nothing "
            f"to profile (`tpuctl stacks {job}` shows where any Python script is)"
        )
        assert r.out == ""
    finally:
        assert cli("cancel", job).code == 0
        wait_for(lambda: emulator.nodes() == [], timeout=120)


@pytest.mark.parametrize("seconds", ["0", "-1", "301", "abc", "nan"])
def test_a_bad_seconds_is_refused_in_one_line(cli, seconds: str) -> None:
    r = cli("profile", "20261129-153012-ab12cd", "--seconds", seconds)
    assert r.code == 2
    assert one_line_error(r) == (
        f"error: invalid --seconds '{seconds}': a number of seconds above 0, at most 300"
    )
