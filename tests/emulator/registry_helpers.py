"""Images made and pushed here as docker does, for the tests of the emulator's registry
and of tpuctl's client of it: a one-layer image (a tar.gz layer, a config, an OCI
manifest), the token dance, a chunked and a monolithic blob upload, a manifest by tag,
and an index over manifests already pushed."""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import tarfile
from typing import Any

PROJECT, REPO = "tpuctl-demo", "images"
PARENT = f"/v1/projects/{PROJECT}/locations/us/repositories"
NAME = f"us-docker.pkg.dev/{PROJECT}/{REPO}/trainer"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def send(address: str, method: str, path: str, body: bytes = b"", **headers: str):
    """(status, headers by lower-case name, body) of one request."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_repository(address: str, repo: str = REPO, project: str = PROJECT) -> None:
    """A DOCKER repository made through Artifact Registry's REST API."""
    status, _, body = send(
        address,
        "POST",
        f"/v1/projects/{project}/locations/us/repositories?repositoryId={repo}",
        json.dumps({"format": "DOCKER"}).encode(),
        **{"Content-Type": "application/json"},
    )
    assert status == 200, body


def image(text: str, config: dict[str, Any] | None = None) -> tuple[bytes, bytes, bytes]:
    """(layer, config, manifest) of a one-layer image whose /app/hello.txt says `text`
    (`config`: the image config's `config` object; default a Cmd and a WorkingDir)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for path, data in (("app/hello.txt", text.encode()), ("app/run.sh", b"cat hello.txt\n")):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer = raw.getvalue()
    diff_id = digest(gzip.decompress(layer))  # the uncompressed layer
    config_blob = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config or {"Cmd": ["sh", "/app/run.sh"], "WorkingDir": "/app"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest(config_blob),
                "size": len(config_blob),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    return layer, config_blob, manifest


def token(registry: str, access: str = "ya29.a-user-token", name: str = NAME) -> str:
    """The token dance: /v2/ answers 401 with the challenge; its realm gives a token."""
    status, headers, body = send(registry, "GET", "/v2/")
    assert status == 401
    challenge = headers["www-authenticate"]
    assert challenge.startswith(f'Bearer realm="http://{registry}/v2/token"')
    assert f'service="{registry}"' in challenge
    assert json.loads(body)["errors"][0]["code"] == "UNAUTHORIZED"
    basic = base64.b64encode(f"oauth2accesstoken:{access}".encode()).decode()
    scope = f"repository:{name}:pull,push"
    status, _, body = send(
        registry,
        "GET",
        f"/v2/token?service={registry}&scope={scope}",
        Authorization=f"Basic {basic}",
    )
    assert status == 200
    answer = json.loads(body)
    assert answer["token"] == answer["access_token"]
    return str(answer["token"])


def push_blob_in_chunks(registry: str, auth: dict[str, str], data: bytes, name: str = NAME):
    status, headers, _ = send(registry, "POST", f"/v2/{name}/blobs/uploads/", **auth)
    assert status == 202
    location = headers["location"]
    half = len(data) // 2
    for chunk in (data[:half], data[half:]):
        status, headers, _ = send(registry, "PATCH", location, chunk, **auth)
        assert status == 202
        location = headers["location"]
    assert headers["range"] == f"0-{len(data) - 1}"
    status, headers, _ = send(registry, "PUT", f"{location}?digest={digest(data)}", **auth)
    assert status == 201
    assert headers["docker-content-digest"] == digest(data)


def put_manifest(
    registry: str, auth: dict[str, str], ref: str, manifest: bytes, media_type: str, name: str
) -> str:
    status, headers, _ = send(
        registry,
        "PUT",
        f"/v2/{name}/manifests/{ref}",
        manifest,
        **auth,
        **{"Content-Type": media_type},
    )
    assert status == 201
    assert headers["docker-content-digest"] == digest(manifest)
    return digest(manifest)


def push(
    registry: str,
    auth: dict[str, str],
    tag: str,
    text: str,
    name: str = NAME,
    config: dict[str, Any] | None = None,
) -> str:
    """Push a one-layer image (`image`) as `name:tag`; its manifest's digest."""
    layer, config_blob, manifest = image(text, config)
    push_blob_in_chunks(registry, auth, layer, name)
    # the config in one POST, as docker sends a small blob
    path = f"/v2/{name}/blobs/uploads/?digest={digest(config_blob)}"
    assert send(registry, "POST", path, config_blob, **auth)[0] == 201
    return put_manifest(registry, auth, tag, manifest, OCI_MANIFEST, name)


def push_index(
    registry: str,
    auth: dict[str, str],
    tag: str,
    platforms: list[tuple[str, str, str]],
    name: str = NAME,
) -> str:
    """An OCI index over manifests already pushed to `name`, one per (os, architecture,
    digest), as `name:tag`; its digest."""
    descriptors = []
    for os_name, arch, manifest_digest in platforms:
        status, headers, _ = send(
            registry,
            "HEAD",
            f"/v2/{name}/manifests/{manifest_digest}",
            Accept=OCI_MANIFEST,
            **auth,
        )
        assert status == 200
        descriptors.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": manifest_digest,
                "size": int(headers["content-length"]),
                "platform": {"os": os_name, "architecture": arch},
            }
        )
    index = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descriptors}
    ).encode()
    return put_manifest(registry, auth, tag, index, OCI_INDEX, name)
