"""OS Login: with `enable-oslogin` on the node or the project, tpuctl imports its key into
the caller's OS Login profile and logs in as the profile's POSIX user; the emulated
workers then take only keys imported (and not expired) for that user."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_gc import quiet_node
from tests.emulator.ssh_helpers import mine, user_key, wait_until
from tpuctl.cloud.clients import ClientFactory
from tpuctl.services import oslogin as oslogin_service
from tpuctl.services import ssh as ssh_service

CALLER = "alice@example.com"
USER = "alice_example_com"
PROJECT = "tpuctl-demo"


@pytest.fixture(autouse=True)
def no_process_left(emulator_server: Any) -> Any:
    yield
    procs = mine(emulator_server)
    wait_until(lambda: not procs(), "the workers' processes to be gone")


@pytest.fixture
def caller(emulator) -> str:
    emulator.config(caller=CALLER)
    return CALLER


def profile(emulator: Any) -> Any:
    return ClientFactory().oslogin_client().get_login_profile(name=f"users/{CALLER}")


def node_metadata(emulator: Any, name: str) -> dict[str, str]:
    full = f"projects/{PROJECT}/locations/us-central1-a/nodes/{name}"
    return dict(emulator.tpu_client().get_node(name=full).metadata)


def test_exec_on_a_node_with_oslogin_logs_in_as_the_profile_user(cli, emulator, caller) -> None:
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        r = cli("exec", "vm", "--", "sh", "-c", 'echo "$USER"')
        assert (r.code, r.out) == (0, f"{USER}\n"), r.err
        got = profile(emulator)
        [account] = got.posix_accounts
        assert (account.username, account.primary) == (USER, True)
        mine_key = ssh_service.key_path().with_suffix(".pub").read_text().split()[:2]
        [key] = got.ssh_public_keys.values()
        assert key.key.split()[:2] == mine_key
        # with an expiry about KEY_TTL away
        left = key.expiration_time_usec / 1e6 - time.time()
        assert oslogin_service.KEY_TTL - 60 < left <= oslogin_service.KEY_TTL
        assert "ssh-keys" not in node_metadata(emulator, "vm")
        # a second command reuses the key: no new import
        before = emulator.requests().get("POST users.importSshPublicKey", 0)
        assert cli("exec", "vm", "--", "true").code == 0
        assert emulator.requests().get("POST users.importSshPublicKey", 0) == before
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def test_project_wide_oslogin_applies_and_the_node_can_opt_out(cli, emulator, caller) -> None:
    emulator.config(project_metadata={PROJECT: {"enable-oslogin": "true"}})
    assert cli("create", "vm", "-a", "v3-8").code == 0
    assert cli("create", "out", "-a", "v3-8", "--metadata", "enable-oslogin=FALSE").code == 0
    try:
        r = cli("exec", "vm", "--", "sh", "-c", 'echo "$USER"')
        assert (r.code, r.out) == (0, f"{USER}\n"), r.err
        assert "ssh-keys" not in node_metadata(emulator, "vm")
        r = cli("exec", "out", "--", "sh", "-c", 'echo "$USER"')
        assert (r.code, r.out.strip()) == (0, ssh_service.ssh_user()), r.err
        assert "ssh-keys" in node_metadata(emulator, "out")
    finally:
        assert cli("delete", "vm", "--yes").code == 0
        assert cli("delete", "out", "--yes").code == 0


def test_scp_and_an_interactive_ssh_command_line_use_the_profile_user(
    cli, emulator, caller, tmp_path: Path
) -> None:
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=1").code == 0
    try:
        src = tmp_path / "f.txt"
        src.write_text("hello\n")
        assert cli("scp", str(src), "vm:f.txt").code == 0
        r = cli("exec", "vm", "--", "cat", "f.txt")
        assert (r.code, r.out) == (0, "hello\n"), r.err
        r = cli("ssh", "vm", "--dry-run")
        assert r.code == 0 and f"-l {USER}" in r.out, r.out
        argv = r.out.split()
        done = subprocess.run(
            [*argv, "-F", "/dev/null", "-o", "BatchMode=yes", "echo $USER"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (0, f"{USER}\n"), done.stderr
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def test_keys_only_in_ssh_keys_are_refused_when_oslogin_is_on(
    cli, emulator, caller, tmp_path: Path
) -> None:
    """OpenSSH with a key that is in `ssh-keys` (and not in the profile) gets nowhere."""
    pub, key = user_key(tmp_path, "bob")
    metadata = f"enable-oslogin=TRUE,ssh-keys=bob:{pub}"
    assert cli("create", "vm", "-a", "v3-8", "--metadata", metadata).code == 0
    try:
        # tpuctl's plan writes the known-hosts file; then OpenSSH as `bob` with bob's key
        plan = ssh_service.plan(ClientFactory().tpu(), ClientFactory().ssh(), full("vm"))
        argv = ssh_service.openssh_command(plan, ["-F", "/dev/null", "-o", "BatchMode=yes"])
        as_bob = [*argv[:1], "-i", str(key), "-l", "bob", *argv[5:]]
        refused = subprocess.run([*as_bob, "echo in"], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 255 and refused.stdout == ""
        assert "Permission denied (publickey)" in refused.stderr
        ok = subprocess.run([*argv, "echo $USER"], capture_output=True, text=True, timeout=60)
        assert (ok.returncode, ok.stdout) == (0, f"{USER}\n"), ok.stderr
        # the same key under the profile's user name is refused too: it was never imported
        as_user = [*argv[:1], "-i", str(key), *argv[3:]]
        again = subprocess.run([*as_user, "echo in"], capture_output=True, text=True, timeout=60)
        assert again.returncode == 255 and "Permission denied" in again.stderr
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def full(name: str) -> str:
    return f"projects/{PROJECT}/locations/us-central1-a/nodes/{name}"


def test_an_expired_imported_key_is_refused_and_tpuctl_renews_it(cli, emulator, caller) -> None:
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        factory = ClientFactory()
        plan = ssh_service.plan(factory.tpu(), factory.ssh(), full("vm"))
        public = ssh_service.key_path().with_suffix(".pub").read_text().strip()
        # the key expires: imported again with an expiry in the past
        factory.oslogin_client().import_ssh_public_key(
            parent=f"users/{CALLER}",
            ssh_public_key={"key": public, "expiration_time_usec": int(time.time() - 5) * 10**6},
        )
        argv = ssh_service.openssh_command(plan, ["-F", "/dev/null", "-o", "BatchMode=yes"])
        refused = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 255 and "Permission denied" in refused.stderr
        # tpuctl sees the expired key in the profile and imports it afresh
        r = cli("exec", "vm", "--", "sh", "-c", 'echo "$USER"')
        assert (r.code, r.out) == (0, f"{USER}\n"), r.err
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def test_a_refused_import_is_one_line_naming_the_role(cli, emulator, caller) -> None:
    emulator.config(denied_permissions=["compute.instances.osLogin"])
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        r = cli("exec", "vm", "--", "true")
        assert r.code == 6, r.err
        line = one_line_error(r)
        assert line.startswith(f"error: OS Login refused your SSH key for {CALLER} in project ")
        assert "roles/compute.osLogin" in line and "roles/compute.osAdminLogin" in line
        assert (
            f"gcloud projects add-iam-policy-binding {PROJECT} --member=user:{CALLER} "
            "--role=roles/compute.osLogin" in r.err
        )
    finally:
        emulator.config(denied_permissions=[])
        assert cli("delete", "vm", "--yes").code == 0


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("enable-oslogin-sk", "security keys"),
        ("enable-oslogin-certificates", "SSH certificates"),
        ("enable-oslogin-2fa", "2-step verification"),
    ],
)
def test_setups_tpuctl_cannot_log_in_to_are_refused_up_front(
    cli, emulator, caller, key: str, words: str
) -> None:
    metadata = f"enable-oslogin=TRUE,{key}=TRUE"
    assert cli("create", "vm", "-a", "v3-8", "--metadata", metadata).code == 0
    try:
        r = cli("exec", "vm", "--", "true")
        assert r.code == 3
        line = one_line_error(r)
        assert words in line and f"{key}=TRUE" in line
        assert emulator.requests().get("POST users.importSshPublicKey", 0) == 0
        # an interactive shell: OpenSSH can answer 2-step verification, not security keys
        shell = cli("ssh", "vm", "--dry-run")
        if key == "enable-oslogin-2fa":
            assert shell.code == 0 and f"-l {USER}" in shell.out, shell.err
        else:
            assert shell.code == 3 and words in one_line_error(shell)
    finally:
        assert cli("delete", "vm", "--yes").code == 0


RUN_SCRIPT = """\
import os
print("worker", os.environ["TPUCTL_WORKER_ID"], "user", os.environ["USER"])
"""


def test_run_on_a_project_with_oslogin_end_to_end(cli, emulator, caller, tmp_path: Path) -> None:
    """A new node of `run` in a project with OS Login on: the agents start over SSH as
    the profile's user, their logs stream back, the node goes at the end."""
    emulator.config(project_metadata={PROJECT: {"enable-oslogin": "TRUE"}})
    (tmp_path / "job.py").write_text(RUN_SCRIPT)
    r = cli("run", str(tmp_path / "job.py"), "-a", "v3-32")
    assert r.code == 0, r.err
    for w in range(4):
        assert f"[w{w}] worker {w} user {USER}" in r.out
    assert emulator.nodes() == []
    assert len(profile(emulator).ssh_public_keys) == 1


def test_run_on_an_existing_oslogin_node_leaves_ssh_keys_alone(
    cli, emulator, caller, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(RUN_SCRIPT)
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        r = cli("run", str(tmp_path / "job.py"), "--node", "vm")
        assert r.code == 0, r.err
        assert f"worker 0 user {USER}" in r.out
        assert "ssh-keys" not in node_metadata(emulator, "vm")
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def test_unreadable_project_metadata_falls_back_to_the_node_and_says_so(
    cli, emulator, caller
) -> None:
    """Without compute.projects.get (roles/tpu.admin lacks it) tpuctl goes by the node's
    metadata; when the project did enforce OS Login, the refusal says what to do."""
    emulator.config(
        project_metadata={PROJECT: {"enable-oslogin": "TRUE"}},
        denied_permissions=["compute.projects.get"],
    )
    assert cli("create", "vm", "-a", "v3-8").code == 0
    try:
        r = cli("exec", "vm", "--connect-timeout", "1", "--", "true")
        assert r.code == 255
        assert "the server refused the key" in r.err
        assert "could not read project tpuctl-demo's metadata" in r.err
        assert "set enable-oslogin=TRUE in the node's metadata" in r.err
        assert "ssh-keys" in node_metadata(emulator, "vm")  # it went the ssh-keys way
        # the node's own switch is enough
        metadata = {**node_metadata(emulator, "vm"), "enable-oslogin": "TRUE"}
        emulator.tpu_client().update_node(
            node={"name": full("vm"), "metadata": metadata}, update_mask="metadata"
        ).result()
        r = cli("exec", "vm", "--", "sh", "-c", 'echo "$USER"')
        assert (r.code, r.out) == (0, f"{USER}\n"), r.err
    finally:
        emulator.config(denied_permissions=[])
        assert cli("delete", "vm", "--yes").code == 0


def test_a_service_account_logs_in_as_sa_and_its_unique_id(cli, emulator) -> None:
    account = "trainer@tpuctl-demo.iam.gserviceaccount.com"
    emulator.config(caller=account)
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        r = cli("exec", "vm", "--", "sh", "-c", 'echo "$USER"')
        assert r.code == 0, r.err
        assert re.fullmatch(r"sa_1[0-9]{20}\n", r.out), r.out
    finally:
        assert cli("delete", "vm", "--yes").code == 0


def test_gcs_idle_probe_reaches_an_oslogin_node(cli, emulator, caller) -> None:
    """gc looks inside a quiet node over SSH as the profile's user: confirmed idle."""
    emulator.config(project_metadata={PROJECT: {"enable-oslogin": "TRUE"}})
    quiet_node(cli, emulator, "quiet")
    r = cli("gc", "--yes", "--idle", "30m")
    assert r.code == 0, r.err
    assert "deleted quiet (us-central1-a, v3-8): idle for 1h (limit 30m): no job, session" in r.out
    assert emulator.nodes() == []
    assert len(profile(emulator).ssh_public_keys) == 1


def test_a_worker_refusing_an_imported_key_names_the_roles(cli, emulator, caller) -> None:
    """The key is in the profile, but the account lost the right to log in."""
    assert cli("create", "vm", "-a", "v3-8", "--metadata", "enable-oslogin=TRUE").code == 0
    try:
        assert cli("exec", "vm", "--", "true").code == 0  # imported
        emulator.config(denied_permissions=["compute.instances.osLogin"])
        r = cli("exec", "vm", "--connect-timeout", "1", "--", "true")
        assert r.code == 255
        assert f"the server refused the key {ssh_service.key_path()} for {USER}" in r.err
        assert "OS Login: the account needs roles/compute.osLogin" in r.err
    finally:
        emulator.config(denied_permissions=[])
        assert cli("delete", "vm", "--yes").code == 0
