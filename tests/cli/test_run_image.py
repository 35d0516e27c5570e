"""`tpuctl run --image` end to end against the emulator: an image pushed to its registry
is resolved on the laptop, pulled by digest on every worker with the VM's token and run
there under the agent's supervision; what fails before create creates nothing, what
fails on the worker leaves nothing billing.

`images` and `shell_image` are for any test of a container job (a slice, Compute Engine,
a Ctrl-C, a preemption): an image whose Cmd prints its file and writes an output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import tomllib

from tests.cli.conftest import one_line_error
from tests.cli.test_run import bucket_objects
from tests.emulator import registry_helpers as reg
from tpuctl.cloud.images import PULL_PERMISSION
from tpuctl.emulator.tpu.models import project_number

pytestmark = reg.CONFINED
IMAGE = reg.NAME  # us-docker.pkg.dev/tpuctl-demo/images/trainer
VM_ACCOUNT = f"{project_number(reg.PROJECT)}-compute@developer.gserviceaccount.com"
# the image's Cmd: what every worker prints, an output, and the exit status $CODE
RUN = """\
echo "worker $TPUCTL_WORKER_ID says $(cat /app/msg)"
echo "made in the image" > "$TPUCTL_OUTPUT_DIR/from-image-$TPUCTL_WORKER_ID.txt"
exit "${CODE:-0}"
"""
# /app/loop.sh: steps until a signal, which it says and saves as its checkpoint; a later
# attempt that finds the checkpoint resumes from it and ends 5 steps on, exit 0
LOOP = """\
ckpt="$TPUCTL_OUTPUT_DIR/step-$TPUCTL_WORKER_ID"
n=0
end=1000000000
if [ -f "$ckpt" ]; then n=$(cat "$ckpt"); end=$((n + 5)); echo "resumed from step $n"; fi
trap 'echo "$n" > "$ckpt"; echo "SIGTERM at step $n: saved"; exit 143' TERM
trap 'echo "$n" > "$ckpt"; echo "SIGINT at step $n: saved"; exit 130' INT
echo "worker $TPUCTL_WORKER_ID looping from step $n"
while [ "$n" -lt "$end" ]; do n=$((n + 1)); sleep 0.02; done
echo "finished at step $n"
"""


def shell_image(msg: str) -> list[bytes]:
    """The layers of an image with a shell, `cat` and `sleep`, /app/msg saying `msg`,
    /app/run.sh (RUN), /app/loop.sh (LOOP) and a libtpu in its Python (so the doctor's
    TPU runtime check passes)."""
    site = "usr/lib/python3/dist-packages"
    return [
        reg.layer({**reg.libraries("/bin/dash", "/bin/cat", "/bin/sleep"), "bin/sh": "/bin/dash"}),
        reg.layer(
            {
                "app/msg": msg.encode(),
                "app/run.sh": RUN.encode(),
                "app/loop.sh": LOOP.encode(),
                f"{site}/libtpu/__init__.py": b"",
                f"{site}/libtpu-0.0.1.dist-info/METADATA": b"Name: libtpu\n",
            }
        ),
    ]


@pytest.fixture
def images(emulator: Any) -> Callable[[str, str], str]:
    """push(tag, msg): a `shell_image` saying `msg` pushed as IMAGE:tag (the repository
    made first), its digest."""
    reg.make_repository(emulator.address)
    registry = str(emulator.status()["registry_endpoint"])
    config = {"Cmd": ["sh", "/app/run.sh"], "WorkingDir": "/app"}

    def push(tag: str, msg: str) -> str:
        return reg.push_image(registry, tag, shell_image(msg), config)

    return push


def job_record(emulator: Any) -> dict[str, Any]:
    (record,) = [
        json.loads(v) for k, v in bucket_objects(emulator).items() if k.endswith("/job.json")
    ]
    return record


def test_the_images_command_runs_with_its_outputs_home_and_its_exit_status(
    cli, emulator, images, tmp_path
) -> None:
    digest = images("v1", "hello from v1")
    out = tmp_path / "out"
    r = cli("run", "--image", f"{IMAGE}:v1", "-a", "v3-8", "--outputs", str(out), "--env", "CODE=3")
    assert r.code == 3, r.err
    assert "worker 0 says hello from v1\n" in r.out, r.out
    assert (out / "from-image-0.txt").read_text() == "made in the image\n"
    assert "deleted node tpuctl-" in r.err
    assert emulator.nodes() == []
    assert f"image: {IMAGE}:v1 is {IMAGE}@{digest}\n" in r.err
    assert "nothing staged (the image's command)" in r.err and " uploaded " not in r.err
    short = f"receipt: image {IMAGE}@{digest[:19]}\n"  # sha256: and 12 hex digits
    assert short in r.err
    (row,) = json.loads(cli("jobs", "--json").out)
    assert row["image"] == f"{IMAGE}@{digest}"
    shown = cli("jobs", row["id"]).out
    assert f"\nimage: {IMAGE}@{digest}\n" in shown and short in shown


def test_a_staged_script_runs_in_the_digest_resolved_though_the_tag_moved(
    cli, emulator, images, tmp_path, monkeypatch
) -> None:
    from tpuctl.cli import doctor_gate

    old = images("v1", "old content")
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.sh").write_text('#!/bin/sh\necho "staged in $(pwd): $(cat /app/msg) $1"\n')
    (work / "job.sh").chmod(0o755)
    resolve = doctor_gate.gate_image

    def then_moved(*args: Any) -> None:  # resolved, then the tag moves before anything runs
        resolve(*args)
        images("v1", "new content")

    monkeypatch.setattr(doctor_gate, "gate_image", then_moved)
    r = cli("run", str(work / "job.sh"), "--image", f"{IMAGE}:v1", "--", "arg")
    assert r.code == 0, r.err
    assert "/code: old content arg\n" in r.out, r.out  # the staged folder, its cwd
    assert "new content" not in r.out
    assert job_record(emulator)["image"] == f"{IMAGE}@{old}"
    assert emulator.nodes() == []


def test_what_the_image_forbids_or_lacks_creates_nothing(cli, emulator, images, tmp_path) -> None:
    r = cli("run", "--image", f"{IMAGE}:v1", "--setup", "true")
    assert r.code == 2
    assert "--image does not go with --setup" in one_line_error(r)
    r = cli("run", "--image", "docker.io/library/python:3")
    assert r.code == 2
    assert "invalid --image" in one_line_error(r)
    # the image as given, the command as typed after --
    r = cli("run", "--image", f"{IMAGE}:v1", "--print-spec", "--", "python3", "-c", "print(1)")
    assert r.code == 0, r.err
    spec = tomllib.loads(r.out)
    assert (spec["image"], spec["script"], spec["args"]) == (
        f"{IMAGE}:v1",
        "python3",
        ["-c", "print(1)"],
    )
    images("v1", "hello")
    r = cli("run", "--image", f"{IMAGE}:nope", "-a", "v3-8")
    assert r.code != 0
    assert "nope" in one_line_error(r)
    assert emulator.nodes() == []


def test_a_vm_account_that_may_not_pull_is_stopped_before_or_right_after_create(
    cli, emulator, images
) -> None:
    images("v1", "hello")
    emulator.config(service_accounts={VM_ACCOUNT: {"denied_permissions": [PULL_PERMISSION]}})
    r = cli("run", "--image", f"{IMAGE}:v1", "-a", "v3-8")
    assert r.code != 0
    assert "[image-pull-denied]" in r.err and "nothing was created" in r.err
    assert emulator.nodes() == []
    r = cli("run", "--image", f"{IMAGE}:v1", "-a", "v3-8", "--no-check", "--", "true")
    assert r.code != 0
    line = one_line_error(r, after_call=True)
    assert f"could not pull {IMAGE}@sha256:" in line and PULL_PERMISSION in line, r.err
    assert emulator.nodes() == []
