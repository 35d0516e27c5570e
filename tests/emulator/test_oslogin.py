"""The emulator's OS Login API subset and Compute's projects.get, driven with Google's
own client (google-cloud-os-login, REST) and plain HTTP for the wire shapes."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gx

from tests.emulator.ssh_helpers import user_key
from tpuctl.cloud.clients import ClientFactory
from tpuctl.emulator.control.client import ControlError, EmulatorControl
from tpuctl.emulator.core.server import EmulatorServer
from tpuctl.emulator.iam.oslogin import posix_username, unique_id

CALLER = "alice@example.com"


@pytest.fixture
def client(emulator) -> Any:
    emulator.config(caller=CALLER)
    return ClientFactory().oslogin_client()


JSON = {"Content-Type": "application/json"}


def http(emulator: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{emulator.address}{path}", data=data, method=method, headers=JSON
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


@pytest.mark.parametrize(
    ("email", "username"),
    [
        ("alice@example.com", "alice_example_com"),
        ("John.Doe+tpu@Example.COM", "john_doe_tpu_example_com"),
        ("a.very.long.name.indeed@subdivision.example.com", "a_very_long_name_indeed_subdivis"),
    ],
)
def test_posix_user_names_derive_from_the_email(email: str, username: str) -> None:
    assert posix_username(email) == username
    assert len(posix_username(email)) <= 32


def test_a_service_accounts_user_name_is_sa_and_its_unique_id() -> None:
    email = "trainer@my-project.iam.gserviceaccount.com"
    name = posix_username(email)
    assert re.fullmatch(r"sa_1[0-9]{20}", name) and name == f"sa_{unique_id(email)}"
    assert posix_username("Trainer@my-project.iam.gserviceaccount.com") == name


def test_a_profile_gets_its_posix_account_with_the_first_key(client, tmp_path: Path) -> None:
    before = client.get_login_profile(name=f"users/{CALLER}")
    assert before.name == CALLER and not before.posix_accounts and not before.ssh_public_keys
    public, _ = user_key(tmp_path, "alice")
    expires = int((time.time() + 3600) * 1e6)
    got = client.import_ssh_public_key(
        parent=f"users/{CALLER}",
        ssh_public_key={"key": public, "expiration_time_usec": expires},
        project_id="tpuctl-demo",
    ).login_profile
    [account] = got.posix_accounts
    assert account.primary and account.username == "alice_example_com"
    assert account.uid == account.gid and account.uid >= 1_000_000_000
    assert account.home_directory == "/home/alice_example_com"
    assert account.operating_system_type.name == "LINUX"
    assert account.account_id == "tpuctl-demo"
    assert account.name == f"users/{CALLER}/projects/tpuctl-demo"
    [(fingerprint, key)] = got.ssh_public_keys.items()
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint) and key.fingerprint == fingerprint
    assert key.key == public and key.expiration_time_usec == expires
    assert key.name == f"users/{CALLER}/sshPublicKeys/{fingerprint}"
    # importing it again renews it: still one key, the new expiry
    again = client.import_ssh_public_key(
        parent=f"users/{CALLER}", ssh_public_key={"key": public, "expiration_time_usec": 7}
    ).login_profile
    assert [k.expiration_time_usec for k in again.ssh_public_keys.values()] == [7]
    client.delete_ssh_public_key(name=f"users/{CALLER}/sshPublicKeys/{fingerprint}")
    assert not client.get_login_profile(name=f"users/{CALLER}").ssh_public_keys
    with pytest.raises(gx.NotFound):
        client.delete_ssh_public_key(name=f"users/{CALLER}/sshPublicKeys/{fingerprint}")


def test_errors_come_in_googles_shape(client, emulator, tmp_path: Path) -> None:
    with pytest.raises(gx.Forbidden):  # someone else's profile
        client.get_login_profile(name="users/bob@example.com")
    with pytest.raises(gx.BadRequest):
        client.import_ssh_public_key(
            parent=f"users/{CALLER}", ssh_public_key={"key": "ssh-ed25519 bm90IGEga2V5"}
        )
    status, body = http(emulator, "GET", "/v1/users/bob@example.com/loginProfile")
    assert status == 403
    assert body == {
        "error": {
            "code": 403,
            "message": "The caller does not have permission",
            "status": "PERMISSION_DENIED",
        }
    }
    public, _ = user_key(tmp_path, "alice")
    emulator.config(denied_permissions=["compute.instances.osLogin"])
    status, body = http(
        emulator, "POST", f"/v1/users/{CALLER}:importSshPublicKey?projectId=p1", {"key": public}
    )
    assert status == 403 and body["error"]["status"] == "PERMISSION_DENIED"
    message = "Permission 'compute.instances.osLogin' denied on 'projects/p1'"
    assert body["error"]["message"] == message
    [info] = body["error"]["details"]
    assert info["reason"] == "IAM_PERMISSION_DENIED"


def test_project_metadata_is_config_and_computes_project_shows_it(emulator) -> None:
    emulator.config(project_metadata={"p1": {"enable-oslogin": "TRUE", "x": "1"}})
    emulator.config(project_metadata={"p1": {"x": None}})
    assert emulator.config()["project_metadata"] == {"p1": {"enable-oslogin": "TRUE"}}
    status, body = http(emulator, "GET", "/compute/v1/projects/p1")
    assert status == 200 and body["name"] == "p1" and body["kind"] == "compute#project"
    assert body["commonInstanceMetadata"]["items"] == [{"key": "enable-oslogin", "value": "TRUE"}]
    assert ClientFactory().project_metadata().project_metadata("p1") == {"enable-oslogin": "TRUE"}
    assert ClientFactory().project_metadata().project_metadata("other") == {}
    with pytest.raises(ControlError, match="project_metadata maps projects"):
        emulator.config(project_metadata={"p1": {"enable-oslogin": True}})
    emulator.config(services={"compute.googleapis.com": False})
    status, body = http(emulator, "GET", "/compute/v1/projects/p1")
    assert status == 403 and body["error"]["details"][0]["reason"] == "SERVICE_DISABLED"


def test_profiles_and_project_metadata_outlive_a_restart(tmp_path: Path) -> None:
    public, _ = user_key(tmp_path, "alice")
    state = tmp_path / "state"
    for round_ in range(2):
        server = EmulatorServer(port=0, state_dir=state, storage=False, ssh=False).start()
        try:
            control = EmulatorControl(server.address)
            if round_ == 0:
                control.config(caller=CALLER, project_metadata={"p1": {"enable-oslogin": "1"}})
                status, _ = http(
                    control, "POST", f"/v1/users/{CALLER}:importSshPublicKey", {"key": public}
                )
                assert status == 200
            else:
                assert control.config()["project_metadata"] == {"p1": {"enable-oslogin": "1"}}
                status, body = http(control, "GET", f"/v1/users/{CALLER}/loginProfile")
                assert status == 200 and len(body["sshPublicKeys"]) == 1
        finally:
            server.stop()
