"""`tpuctl run` across attempts runs what was submitted: a request rewritten in the
bucket between attempts is refused on the next one, also on a node recreated after a
preemption (its digest reaches the new node over SSH, as the first one's did); and an
attempt that may be retried (--retry-on-failure) keeps its node for the next one."""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.attack import REWRITE
from tests.cli.test_run import _running, bucket_objects, wait_for

FAIL_ONCE = """\
import os, sys
print("attempt", os.environ["TPUCTL_ATTEMPT"])
sys.exit(3 if os.environ["TPUCTL_RESTART"] == "0" else 0)
"""


def test_a_request_rewritten_before_a_recovery_is_refused_on_the_new_node(
    emulator, tmp_path: Path
) -> None:
    script, marker = tmp_path / "job" / "rewrite.py", tmp_path / "rewritten"
    script.parent.mkdir()
    script.write_text(REWRITE)  # its first attempt rewrites its own request, then waits
    bucket = "tpuctl-demo-tpuctl"
    with _running(
        script, "--spot", "--restarts", "1", "--", bucket, "-", str(marker), "wait"
    ) as proc:

        def rewritten() -> bool:
            objects = bucket_objects(emulator, lambda k: k.endswith("/request.json"))
            return any(b"touch" in v for v in objects.values())

        wait_for(rewritten)
        emulator.preempt(str(emulator.nodes()[0]["name"]))
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert "recreating it (restart 1 of 1)" in err
    assert "refused: the request in the bucket" in err
    assert "is not the one submitted" in err
    assert not marker.exists() and "the second attempt ran" not in out
    wait_for(lambda: emulator.nodes() == [])  # refused, then torn down as usual


def test_retry_on_failure_keeps_the_node_for_the_next_attempt(cli, emulator, tmp_path) -> None:
    script = tmp_path / "job" / "flaky.py"
    script.parent.mkdir()
    script.write_text(FAIL_ONCE)
    r = cli("run", str(script), "--retry-on-failure", "--restarts", "1")
    assert r.code == 0, r.err
    assert "attempt 1 failed; restarting (--retry-on-failure)" in r.err
    assert "attempt 1\n" in r.out and "attempt 2\n" in r.out
    assert emulator.nodes() == []  # deleted at the job's end, not after attempt 1


QUIET = """\
import os
print("the script got", len(os.environ["API_KEY"]) + len(os.environ["HF_TOKEN"]), "characters")
"""


def test_env_values_reach_no_state_file_and_no_debug_line(cli, emulator, tmp_path) -> None:
    script = tmp_path / "job" / "quiet.py"
    script.parent.mkdir()
    script.write_text(QUIET)
    flag, from_file = "sk-" + secrets.token_hex(12), "hf_" + secrets.token_hex(12)
    env_file = tmp_path / "secrets.env"  # the user's own file, outside the dirs looked at
    env_file.write_text(f"HF_TOKEN={from_file}\n")
    r = cli("run", str(script), "--debug", "--env", f"API_KEY={flag}", "--env-file", str(env_file))
    assert r.code == 0, r.err
    assert f"the script got {len(flag) + len(from_file)} characters" in r.out
    assert "GET " in r.err or "POST " in r.err  # the trace was on
    isolated = tmp_path / "env"  # HOME, the config and state dirs, the work dir
    assert isolated.is_dir()
    for value in (flag, from_file):
        assert value not in r.err and value not in r.out
        assert not [
            p for p in isolated.rglob("*") if p.is_file() and value in p.read_text("latin-1")
        ]
