"""A VM's token carries its node's service account and scopes (iam/accounts.py): the TPU API and
Cloud Storage (through the workers' proxy) refuse what the scope or the account's
permissions do not allow, in Google's shapes; calls without such a token stay the
caller's. Resource Manager's testIamPermissions and IAM's serviceAccounts.get answer
for either."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tpuctl.emulator.tpu.models import project_number

P, Z = "proj-a", "us-central1-a"
PARENT = f"projects/{P}/locations/{Z}"
SA = f"trainer@{P}.iam.gserviceaccount.com"
READ_ONLY = "https://www.googleapis.com/auth/devstorage.read_only"


def _call(
    url: str, method: str = "GET", body: Any = None, token: str | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw.strip() else {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _node(emulator, name: str, account: dict[str, Any] | None = None) -> str:
    """Create a node; the token its worker 0's metadata server mints."""
    from google.cloud import tpu_v2

    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-vm-base")
    if account:
        node.service_account = tpu_v2.ServiceAccount(**account)
    emulator.tpu_client().create_node(parent=PARENT, node_id=name, node=node).result(timeout=10)
    url = (
        f"http://{emulator.address}/_emulator/v1/metadata/{P}/{Z}/{name}/0/computeMetadata/v1/"
        "instance/service-accounts/default/token"
    )
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request) as r:
        return str(json.loads(r.read())["access_token"])


@pytest.fixture
def cleanup(emulator):
    yield
    emulator.durations(delete=0)
    client = emulator.tpu_client()
    for node in emulator.nodes():
        client.delete_node(name=node["name"]).result(timeout=10)


def test_a_token_without_the_scope_is_refused_by_the_tpu_api(emulator, cleanup) -> None:
    token = _node(emulator, "n1", {"scope": [READ_ONLY]})
    status, body = _call(f"http://{emulator.address}/v2/{PARENT}/nodes/n1", "DELETE", token=token)
    assert status == 403
    error = body["error"]
    assert error["message"] == "Request had insufficient authentication scopes."
    assert error["status"] == "PERMISSION_DENIED"
    assert error["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"
    # the caller (no token) is not the VM: the same call goes through
    assert _call(f"http://{emulator.address}/v2/{PARENT}/nodes/n1")[0] == 200


def test_the_accounts_permissions_decide_for_its_token(emulator, cleanup) -> None:
    emulator.config(service_accounts={SA: {"denied_permissions": ["tpu.nodes.delete"]}})
    token = _node(emulator, "n2", {"email": SA})
    url = f"http://{emulator.address}/v2/{PARENT}/nodes/n2"
    assert _call(url, token=token)[0] == 200  # tpu.nodes.get: held
    status, body = _call(url, "DELETE", token=token)
    assert status == 403
    assert (
        body["error"]["message"] == f"Permission 'tpu.nodes.delete' denied on '{PARENT}/nodes/n2'"
    )
    assert body["error"]["details"][0]["reason"] == "IAM_PERMISSION_DENIED"
    # the caller's own permissions are another matter; the config shows the account's
    assert emulator.config()["service_accounts"] == {
        SA: {"denied_permissions": ["tpu.nodes.delete"]}
    }


def test_bad_service_account_config_is_refused(emulator) -> None:
    from tpuctl.emulator.control.client import ControlError

    with pytest.raises(ControlError, match="service_accounts"):
        emulator.config(service_accounts={SA: {"roles": ["roles/owner"]}})


def test_storage_through_the_workers_proxy(emulator, cleanup) -> None:
    emulator.storage_client(P).create_bucket("b-vm")
    proxy = emulator.status()["storage_endpoint"]  # the proxy, which every client uses
    emulator.config(service_accounts={SA: {"denied_permissions": ["storage.objects.create"]}})
    writer = _node(emulator, "n3")  # the default compute account: every permission
    denied = _node(emulator, "n4", {"email": SA})
    reader = _node(emulator, "n5", {"scope": [READ_ONLY]})
    upload = f"{proxy}/upload/storage/v1/b/b-vm/o?uploadType=media&name=jobs/x"
    status, obj = _call(upload, "POST", {"a": 1}, token=writer)
    assert status == 200 and obj["name"] == "jobs/x"
    status, body = _call(upload, "POST", {"a": 1}, token=denied)
    assert status == 403
    assert body["error"]["message"] == (
        f"{SA} does not have storage.objects.create access to the Google Cloud Storage "
        "object. Permission 'storage.objects.create' denied on resource (or it may not exist)."
    )
    assert body["error"]["errors"][0]["reason"] == "forbidden"
    status, body = _call(upload, "POST", {"a": 1}, token=reader)
    assert (status, body["error"]["message"]) == (403, "Provided scope(s) are not authorized")
    # reading is within the read-only scope; the caller (no token) passes unchecked
    assert _call(f"{proxy}/storage/v1/b/b-vm/o/jobs%2Fx", token=reader)[0] == 200
    assert _call(upload, "POST", {"a": 2})[0] == 200


def test_test_iam_permissions_answers_for_the_caller_and_the_vm(emulator, cleanup) -> None:
    emulator.config(service_accounts={SA: {"denied_permissions": ["tpu.nodes.delete"]}})
    token = _node(emulator, "n6", {"email": SA})
    emulator.config(denied_permissions=["tpu.nodes.create"])
    url = f"http://{emulator.address}/v1/projects/{P}:testIamPermissions"
    asked = {"permissions": ["tpu.nodes.create", "tpu.nodes.delete"]}
    assert _call(url, "POST", asked) == (200, {"permissions": ["tpu.nodes.delete"]})
    assert _call(url, "POST", asked, token=token) == (200, {"permissions": ["tpu.nodes.create"]})
    assert _call(url, "POST", {"permissions": "x"})[0] == 400


def test_service_accounts_get(emulator) -> None:
    emulator.config(service_accounts={SA: {}})
    base = f"http://{emulator.address}/v1/projects/{P}/serviceAccounts"
    default = f"{project_number(P)}-compute@developer.gserviceaccount.com"
    status, body = _call(f"{base}/{default}")
    assert status == 200 and body["email"] == default
    assert body["displayName"] == "Compute Engine default service account"
    assert _call(f"{base}/{SA}")[1]["email"] == SA
    status, body = _call(f"{base}/nobody@{P}.iam.gserviceaccount.com")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"


def test_a_resumable_upload_stays_behind_the_proxy(emulator, cleanup) -> None:
    emulator.storage_client(P).create_bucket("b-resumable")
    proxy = emulator.status()["storage_endpoint"]
    token = _node(emulator, "n7")
    start = urllib.request.Request(
        f"{proxy}/upload/storage/v1/b/b-resumable/o?uploadType=resumable&name=big",
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(start) as r:
        session = r.headers["Location"]
    assert session.startswith(proxy + "/")  # the chunks come back through the proxy
    data = bytes(range(256)) * 4096  # 1 MiB, in one chunk
    put = urllib.request.Request(
        session,
        data=data,
        method="PUT",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}",
        },
    )
    with urllib.request.urlopen(put) as r:
        assert int(json.loads(r.read())["size"]) == len(data)
    default = f"{project_number(P)}-compute@developer.gserviceaccount.com"
    emulator.config(service_accounts={default: {"denied_permissions": ["storage.objects.get"]}})
    assert _call(f"{proxy}/storage/v1/b/b-resumable/o/big?alt=media", token=token)[0] == 403


def test_a_vms_token_outlives_an_emulator_restart(tmp_path) -> None:  # noqa: ANN001
    """An agent keeps its token for an hour, and Google's servers restarting does not
    void it: after the emulator restarts, the token is still the VM's account (not
    the caller, who may delete nodes), until a reset forgets it."""
    from tests.conftest import Emulator
    from tpuctl.emulator.core.server import EmulatorServer

    def start() -> tuple[EmulatorServer, Emulator]:
        server = EmulatorServer(host="127.0.0.1", port=0, state_dir=tmp_path / "emu").start()
        return server, Emulator(server.address)

    server, emulator = start()
    try:
        emulator.durations(create=0, delete=0)
        emulator.config(service_accounts={SA: {"denied_permissions": ["tpu.nodes.delete"]}})
        token = _node(emulator, "kept", {"email": SA})
    finally:
        server.stop()
    server, emulator = start()
    try:
        url = f"http://{emulator.address}/v2/{PARENT}/nodes/kept"
        status, body = _call(url, "DELETE", token=token)
        assert status == 403, body
        assert body["error"]["details"][0]["reason"] == "IAM_PERMISSION_DENIED"
        emulator.reset()
        emulator.config(service_accounts={SA: {"denied_permissions": ["tpu.nodes.delete"]}})
        assert _call(url, token=token)[0] == 404  # the token is the caller's again: no node
    finally:
        server.stop()
