"""Images made and pushed here as docker does, for the tests of the emulator's registry
and of tpuctl's client of it: a one-layer image (a tar.gz layer, a config, an OCI
manifest), the token dance, a chunked and a monolithic blob upload, a manifest by tag,
and an index over manifests already pushed; and images a worker's docker can run
(`layer`, `libraries`: a shell and the programs it calls, with their libraries;
`push_image`)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tpuctl.emulator.workers.sandbox import Sandbox

PROJECT, REPO = "tpuctl-demo", "images"
PARENT = f"/v1/projects/{PROJECT}/locations/us/repositories"
NAME = f"us-docker.pkg.dev/{PROJECT}/{REPO}/trainer"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
# an emulated worker runs containers only in its sandbox
CONFINED = pytest.mark.skipif(Sandbox().mode != "bwrap", reason="needs bubblewrap")


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
    return layer, config_blob, manifest_of(config_blob, [layer])


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


def layer(files: dict[str, bytes | str | None], gzip: bool = True) -> bytes:
    """A layer: a path's bytes, a host file's path to copy (str, executable), or None for
    a FIFO."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz" if gzip else "w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            if data is None:
                info.type = tarfile.FIFOTYPE
            elif isinstance(data, str):
                data = Path(data).read_bytes()
                info.mode = 0o755
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def libraries(*programs: str) -> dict[str, str]:
    """The programs and the shared libraries `ldd` names for them, by their path (for
    `layer`: a root in which they run)."""
    found = {}
    for program in programs:
        found[program.lstrip("/")] = os.path.realpath(program)
        listed = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
        for line in listed.split("\n"):
            path = next((w for w in line.split() if w.startswith("/")), None)
            if path:
                found[path.lstrip("/")] = os.path.realpath(path)
    return found


def push_image(
    registry: str, tag: str, layers: list[bytes], config: dict[str, Any], name: str = NAME
) -> str:
    """Push an image of `layers` (gzipped or not, as each is) whose image config's
    `config` is `config`, as `name:tag`, each blob in one POST; its manifest's digest."""
    auth = {"Authorization": f"Bearer {token(registry, name=name)}"}
    config_blob = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": []},
        }
    ).encode()
    for blob in [*layers, config_blob]:
        path = f"/v2/{name}/blobs/uploads/?digest={digest(blob)}"
        assert send(registry, "POST", path, blob, **auth)[0] == 201
    manifest = manifest_of(config_blob, layers)
    return put_manifest(registry, auth, tag, manifest, OCI_MANIFEST, name)


def manifest_of(config_blob: bytes, layers: list[bytes]) -> bytes:
    """An OCI image manifest of a config and layers (each gzipped or not, as it is)."""
    described = [
        {
            "mediaType": "application/vnd.oci.image.layer.v1."
            + ("tar+gzip" if blob[:2] == b"\x1f\x8b" else "tar"),
            "digest": digest(blob),
            "size": len(blob),
        }
        for blob in layers
    ]
    config = {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        "digest": digest(config_blob),
        "size": len(config_blob),
    }
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config}
    return json.dumps({**manifest, "layers": described}).encode()
