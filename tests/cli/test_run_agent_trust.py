"""A job cannot change the agent of the jobs after it on its node: the agent's code runs
as the client sent it, checked when it is used. A job that rewrites the agent's bundle
on the VM, its modules wherever they were extracted, and plants compiled .pyc files in
their stead leaves the next job's agent unchanged (the bundle is installed again and
checked), and its own agent too (what it imports later comes from the bytes checked at
its start); one it cannot check refuses the next job's start, saying so in one line."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from tests.attack import TAMPER
from tests.cli.conftest import Cli, Result, one_line_error
from tpuctl.agent import bundle

VICTIM = 'print("the victim ran")\n'
BLOCK = """\
import glob, os
for pyz in glob.glob(os.path.expanduser("~/.tpuctl/tpuctl-agent-*.pyz")):
    os.remove(pyz)
    os.mkdir(pyz)  # the next install's rename goes into it: no file there to check
    print("blocked", os.path.basename(pyz))
"""


@contextlib.contextmanager
def _shared_node(cli: Cli) -> Iterator[None]:
    """A node the jobs run on one after the other (`run --node`), deleted at the end."""
    assert cli("create", "shared", "-a", "v3-8").code == 0
    try:
        yield
    finally:
        assert cli("delete", "shared", "--yes").code == 0


def _job(cli: Cli, tmp_path: Path, name: str, script: str) -> Result:
    (tmp_path / name).mkdir()
    (tmp_path / name / f"{name}.py").write_text(script)
    return cli("run", str(tmp_path / name / f"{name}.py"), "--node", "shared")


def test_a_job_that_rewrites_the_agent_on_its_vm_changes_nothing_of_the_next_job(
    cli, emulator, emulator_server, tmp_path: Path
) -> None:
    with _shared_node(cli):
        first = _job(cli, tmp_path, "tamper", TAMPER)
        assert first.code == 0, first.err
        assert "tampered: bundle pyc source" in first.out  # it found and rewrote them
        second = _job(cli, tmp_path, "victim", VICTIM)
        assert second.code == 0, second.err
        assert "the victim ran" in second.out
        home = next(Path(emulator_server.backend.workers.root).glob("*/w0/home"))
        log = home / "tampered.log"
        ran = log.read_text() if log.exists() else ""
        installed = (home / bundle.remote_path().removeprefix("~/")).read_bytes()
    assert ran == "", f"the tampered agent code ran, first in: {ran.splitlines()[0][-300:]}"
    assert hashlib.sha256(installed).hexdigest() == bundle.sha256()  # sent again


def test_a_bundle_the_next_job_cannot_check_refuses_its_start_with_one_line(
    cli, emulator, tmp_path: Path
) -> None:
    with _shared_node(cli):
        first = _job(cli, tmp_path, "block", BLOCK)
        assert first.code == 0 and f"blocked {bundle.file_name()}" in first.out, first.err
        second = _job(cli, tmp_path, "victim", VICTIM)
    said = one_line_error(second, after_call=True)
    assert said.startswith("error: could not start the job on worker 0: tpuctl-agent: refused: ")
    assert "the agent bundle /" in said and f"/.tpuctl/{bundle.file_name()} is not the one" in said
    assert "it cannot be read (Is a directory); it was changed on the VM (by a job?)" in said
    assert second.code != 0 and "the victim ran" not in second.out
