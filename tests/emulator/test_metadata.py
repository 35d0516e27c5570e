"""The per-worker metadata server under /_emulator/v1/metadata/..."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tpuctl.emulator.tpu.models import project_number


def _get(url: str, flavor: bool = True) -> tuple[int, str, str]:
    headers = {"Metadata-Flavor": "Google"} if flavor else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def slice4(emulator):
    """A 4-worker v4-32 with metadata of its own; yields the URL of worker 2's server."""
    from google.cloud import tpu_v2

    client = emulator.tpu_client()
    node = tpu_v2.Node(
        accelerator_type="v4-32",
        runtime_version="tpu-ubuntu2204-base",
        metadata={"startup-script": "echo hi"},
    )
    parent = "projects/proj-a/locations/us-central2-b"
    client.create_node(parent=parent, node_id="n4", node=node).result(timeout=10)
    yield f"http://{emulator.address}/_emulator/v1/metadata/proj-a/us-central2-b/n4/2/computeMetadata/v1"
    client.delete_node(name=f"{parent}/nodes/n4").result(timeout=10)


def test_values_of_a_worker(slice4: str, emulator) -> None:
    number = project_number("proj-a")
    assert _get(f"{slice4}/project/project-id")[::2] == (200, "proj-a")
    assert _get(f"{slice4}/project/numeric-project-id")[2] == number
    assert _get(f"{slice4}/instance/zone")[2] == f"projects/{number}/zones/us-central2-b"
    email = _get(f"{slice4}/instance/service-accounts/default/email")[2]
    assert email == f"{number}-compute@developer.gserviceaccount.com"
    hostname = _get(f"{slice4}/instance/hostname")[2]
    assert hostname.endswith("-w-2.us-central2-b.c.proj-a.internal")
    assert _get(f"{slice4}/instance/id")[2].isdigit()
    assert _get(f"{slice4}/instance/network-interfaces/0/ip")[2].startswith("127.")


def test_token_is_json_and_counted(slice4: str, emulator) -> None:
    status, ctype, body = _get(f"{slice4}/instance/service-accounts/default/token")
    token = json.loads(body)
    assert (status, ctype) == (200, "application/json")
    assert token["token_type"] == "Bearer" and token["expires_in"] > 60
    assert token["access_token"]
    assert emulator.requests()["GET metadata.token"] == 1


def test_attributes_of_a_tpu_worker(slice4: str, emulator) -> None:
    listing = _get(f"{slice4}/instance/attributes/")[2].split()
    assert {"startup-script", "accelerator-type", "agent-worker-number", "tpu-env"} <= set(listing)
    assert _get(f"{slice4}/instance/attributes/startup-script")[2] == "echo hi"
    assert _get(f"{slice4}/instance/attributes/accelerator-type")[2] == "v4-32"
    assert _get(f"{slice4}/instance/attributes/agent-worker-number")[2] == "2"
    endpoints = _get(f"{slice4}/instance/attributes/worker-network-endpoints")[2].split(",")
    assert len(endpoints) == 4
    assert all(len(e.split(":")) == 3 and "-w-" in e for e in endpoints)
    # JAX's cloud_tpu_cluster reads the third field as each worker's address, in order
    (node,) = emulator.nodes()
    assert [e.split(":")[2] for e in endpoints] == [
        ep["ipAddress"] for ep in node["networkEndpoints"]
    ]
    env = dict(
        line.split(": ", 1)
        for line in _get(f"{slice4}/instance/attributes/tpu-env")[2].splitlines()
    )
    assert env["NODE_ID"] == "'n4'" and env["WORKER_ID"] == "'2'"
    assert env["ZONE"] == "'us-central2-b'" and env["TOPOLOGY"] == "'2x2x4'"
    assert env["HOST_BOUNDS"] == "'1,1,4'" and env["CHIPS_PER_HOST_BOUNDS"] == "'2,2,1'"
    recursive = json.loads(_get(f"{slice4}/instance/attributes/?recursive=true")[2])
    assert recursive["accelerator-type"] == "v4-32"


def test_header_required_and_unknowns_are_404(slice4: str, emulator) -> None:
    assert _get(f"{slice4}/project/project-id", flavor=False)[0] == 403
    assert _get(f"{slice4}/instance/attributes/nope")[0] == 404
    assert _get(f"{slice4}/instance/nothing/here")[0] == 404
    assert _get(slice4.replace("/n4/2/", "/n4/4/") + "/project/project-id")[0] == 404
    assert _get(slice4.replace("/n4/", "/ghost/") + "/project/project-id")[0] == 404
