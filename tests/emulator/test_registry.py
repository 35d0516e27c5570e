"""Artifact Registry (registry/): a repository made through the REST API, then an image
built here (a tar.gz layer, a config, an OCI manifest) pushed over the Docker registry
API as docker does (the token dance, a chunked upload, a monolithic one, the manifest by
tag) and pulled back, digest for digest; a moved tag; the registry's refusals."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import pytest

from tests.emulator.registry_helpers import (
    NAME,
    OCI_MANIFEST,
    PARENT,
    PROJECT,
    REPO,
    make_repository,
)
from tests.emulator.registry_helpers import digest as _digest
from tests.emulator.registry_helpers import image as _image
from tests.emulator.registry_helpers import push as _push
from tests.emulator.registry_helpers import send as _send
from tests.emulator.registry_helpers import token as _token


@pytest.fixture
def registry(emulator) -> str:
    """The registry's address, with the repository made through the REST API."""
    make_repository(emulator.address)
    return str(emulator.status()["registry_endpoint"])


def _pull_text(registry: str, auth: dict[str, str], reference: str) -> str:
    """What /app/hello.txt says in the image of `reference`, every digest checked."""
    status, headers, body = _send(
        registry, "GET", f"/v2/{NAME}/manifests/{reference}", Accept=OCI_MANIFEST, **auth
    )
    assert status == 200
    assert headers["content-type"] == OCI_MANIFEST
    assert headers["docker-content-digest"] == _digest(body)
    manifest = json.loads(body)
    blobs = {}
    for descriptor in [manifest["config"], *manifest["layers"]]:
        status, headers, data = _send(
            registry, "GET", f"/v2/{NAME}/blobs/{descriptor['digest']}", **auth
        )
        assert status == 200
        assert _digest(data) == descriptor["digest"] == headers["docker-content-digest"]
        blobs[descriptor["mediaType"]] = data
    layer = blobs["application/vnd.oci.image.layer.v1.tar+gzip"]
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
        member = tar.extractfile("app/hello.txt")
        assert member is not None
        return member.read().decode()


def test_an_image_pushed_as_docker_does_is_pulled_back_by_tag_and_digest(
    emulator, registry
) -> None:
    auth = {"Authorization": f"Bearer {_token(registry)}"}
    assert _send(registry, "GET", "/v2/", **auth)[0] == 200
    first = _push(registry, auth, "v1", "hello from v1")
    assert _pull_text(registry, auth, "v1") == "hello from v1"
    assert _pull_text(registry, auth, first) == "hello from v1"
    status, headers, body = _send(registry, "HEAD", f"/v2/{NAME}/manifests/v1", **auth)
    assert (status, headers["docker-content-digest"], body) == (200, first, b"")

    # the tag moves: the tag gives the new image, the old digest still the old one
    second = _push(registry, auth, "v1", "hello from v2")
    assert second != first
    assert _pull_text(registry, auth, "v1") == "hello from v2"
    assert _pull_text(registry, auth, first) == "hello from v1"
    status, _, body = _send(registry, "GET", f"/v2/{NAME}/tags/list", **auth)
    assert (status, json.loads(body)) == (200, {"name": NAME, "tags": ["v1"]})

    images = emulator.call("GET", "registry/images")["images"]
    assert images == [
        {
            "name": NAME,
            "tags": {"v1": second},
            "manifests": {first: OCI_MANIFEST, second: OCI_MANIFEST},
        }
    ]


def test_the_registry_refuses_as_artifact_registry_does(emulator, registry) -> None:
    auth = {"Authorization": f"Bearer {_token(registry)}"}

    def error(*request: Any, **headers: str) -> tuple[int, str]:
        status, _, body = _send(registry, *request, **{**auth, **headers})
        return status, json.loads(body)["errors"][0]["code"]

    missing_repo = NAME.replace(REPO, "nope")
    assert error("GET", f"/v2/{missing_repo}/manifests/v1") == (404, "NAME_UNKNOWN")
    assert error("POST", f"/v2/{missing_repo}/blobs/uploads/") == (404, "NAME_UNKNOWN")
    assert error("GET", f"/v2/{NAME}/manifests/v9") == (404, "MANIFEST_UNKNOWN")
    assert error("GET", f"/v2/{NAME}/blobs/{_digest(b'none')}") == (404, "BLOB_UNKNOWN")
    # a blob whose bytes are not its digest's is not stored
    wrong = f"/v2/{NAME}/blobs/uploads/?digest={_digest(b'other bytes')}"
    assert error("POST", wrong, b"these bytes") == (400, "DIGEST_INVALID")
    assert error("GET", f"/v2/{NAME}/blobs/{_digest(b'other bytes')}") == (404, "BLOB_UNKNOWN")
    # a manifest naming layers never pushed
    _, _, manifest = _image("never pushed")
    put = ("PUT", f"/v2/{NAME}/manifests/v1", manifest)
    assert error(*put, **{"Content-Type": OCI_MANIFEST}) == (400, "MANIFEST_BLOB_UNKNOWN")
    # no credentials: the challenge; the caller without the permission: DENIED
    status, headers, _ = _send(registry, "GET", f"/v2/{NAME}/tags/list")
    assert status == 401
    assert f'scope="repository:{NAME}:pull"' in headers["www-authenticate"]
    emulator.config(denied_permissions=["artifactregistry.repositories.downloadArtifacts"])
    status, _, body = _send(registry, "GET", f"/v2/{NAME}/tags/list", **auth)
    assert status == 403
    message = json.loads(body)["errors"][0]["message"]
    resource = f"projects/{PROJECT}/locations/us/repositories/{REPO}"
    assert message == (
        'Permission "artifactregistry.repositories.downloadArtifacts" denied on resource '
        f'"{resource}" (or it may not exist)'
    )


def test_a_vm_token_pulls_with_a_storage_read_scope_and_cannot_push(
    emulator, emulator_server, registry
) -> None:
    read_only = emulator_server.backend.mint_token(
        "sa@tpuctl-demo.iam.gserviceaccount.com",
        ["https://www.googleapis.com/auth/devstorage.read_only"],
        PROJECT,
    )
    auth = {"Authorization": f"Bearer {_token(registry, read_only)}"}
    assert _send(registry, "GET", f"/v2/{NAME}/tags/list", **auth)[0] == 200
    status, _, body = _send(registry, "POST", f"/v2/{NAME}/blobs/uploads/", **auth)
    assert status == 403
    assert "uploadArtifacts" in json.loads(body)["errors"][0]["message"]


def test_repositories_are_made_got_and_listed_through_the_rest_api(emulator, registry) -> None:
    status, _, body = _send(emulator.address, "GET", f"{PARENT}/{REPO}")
    assert status == 200
    repository = json.loads(body)
    assert repository["name"] == f"projects/{PROJECT}/locations/us/repositories/{REPO}"
    assert (repository["format"], repository["registryUri"]) == (
        "DOCKER",
        f"us-docker.pkg.dev/{PROJECT}/{REPO}",
    )
    listed = json.loads(_send(emulator.address, "GET", PARENT)[2])["repositories"]
    assert [r["name"] for r in listed] == [repository["name"]]
    create = ("POST", f"{PARENT}?repositoryId={REPO}", json.dumps({"format": "DOCKER"}).encode())
    status, _, body = _send(emulator.address, *create, **{"Content-Type": "application/json"})
    assert (status, json.loads(body)["error"]["status"]) == (409, "ALREADY_EXISTS")
    assert _send(emulator.address, "GET", f"{PARENT}/other")[0] == 404

    # the answer of a create is its operation, done, whose response is the repository
    create = ("POST", f"{PARENT}?repositoryId=more", json.dumps({"format": "DOCKER"}).encode())
    operation = json.loads(
        _send(emulator.address, *create, **{"Content-Type": "application/json"})[2]
    )
    assert operation["done"] is True
    assert operation["response"]["name"].endswith("/repositories/more")
    again = json.loads(_send(emulator.address, "GET", f"/v1/{operation['name']}")[2])
    assert again == operation

    # gated as every API: off in a new project
    emulator.config(services="new-project")
    status, _, body = _send(emulator.address, "GET", f"{PARENT}/{REPO}")
    assert status == 403
    assert json.loads(body)["error"]["details"][0]["reason"] == "SERVICE_DISABLED"


def test_an_image_outlives_a_restart_on_the_same_port(tmp_path, isolated_env) -> None:
    """The repository, the tags and the blobs (files in the state dir) are kept; the
    registry takes its port back, as the cloud's endpoints never move."""
    from tpuctl.emulator.core.server import EmulatorServer

    state = tmp_path / "emu"
    kwargs = {"port": 0, "state_dir": state, "storage": False, "ssh": False}
    with EmulatorServer(**kwargs) as first:
        make_repository(first.address)
        registry = first.backend.front_endpoints["registry"]
        auth = {"Authorization": f"Bearer {_token(registry)}"}
        digest = _push(registry, auth, "v1", "kept")
    assert list((state / "registry" / "sha256").iterdir())  # blobs are files
    with EmulatorServer(**kwargs) as again:
        assert again.backend.front_endpoints["registry"] == registry
        auth = {"Authorization": f"Bearer {_token(registry)}"}
        assert _pull_text(registry, auth, "v1") == "kept"
        assert _pull_text(registry, auth, digest) == "kept"
