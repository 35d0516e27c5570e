"""Artifact Registry's Docker API: the OCI distribution API as `LOCATION-docker.pkg.dev`
answers it (https://cloud.google.com/artifact-registry/docs/reference/docker-api; the
protocol: https://github.com/opencontainers/distribution-spec/blob/main/spec.md).

Mapping: one port for every location. An image keeps its real name as the repository
name under the emulator's registry address, host included: `us-docker.pkg.dev/P/R/I:T`
is `REGISTRY/us-docker.pkg.dev/P/R/I:T` (`emulator status --json`'s `registry_endpoint`
is REGISTRY), so requests are `/v2/us-docker.pkg.dev/P/R/I/manifests/T`. A client maps
an image by prefixing the address; the location is the host's first part.

Token auth, as Docker's token specification has it
(https://distribution.github.io/distribution/spec/auth/token/): a call without
credentials is 401 with `WWW-Authenticate: Bearer realm="http://REGISTRY/v2/token",
service="REGISTRY"` (and the scope it needs); `GET /v2/token` takes Basic
`oauth2accesstoken:<access token>` (what `docker login` with an access token sends,
https://cloud.google.com/artifact-registry/docs/docker/authentication#token) and answers
`{"token", "access_token", "expires_in", "issued_at"}`; no credentials get an anonymous
token. A bearer access token is also taken directly, as the Docker API reference's curl
example sends it. A VM's token (the metadata server's) is its account's, checked for
its scopes as Cloud Storage's are (pulls need a storage read scope, pushes read-write);
any other token is the caller's.

Refusals: the distribution spec's body `{"errors": [{"code", "message", "detail"}]}`;
DENIED (403) with Artifact Registry's wording, `Permission "artifactregistry.
repositories.downloadArtifacts" denied on resource "projects/P/locations/L/repositories/R"
(or it may not exist)` (`Unauthenticated request. Unauthenticated requests do not have
permission ...` for the anonymous); NAME_UNKNOWN (404) for a repository not created
(`Repository "R" not found`); MANIFEST_UNKNOWN, BLOB_UNKNOWN, DIGEST_INVALID,
MANIFEST_INVALID, MANIFEST_BLOB_UNKNOWN, BLOB_UPLOAD_UNKNOWN as the spec lists them.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tpuctl.emulator.iam.accounts import scope_allows
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.registry.blobs import DIGEST, BlobError, Blobs
from tpuctl.emulator.registry.repositories import Registry

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST)
INDEXES = (OCI_INDEX, DOCKER_LIST)
MAX_MANIFEST = 4 << 20  # the distribution spec's suggested bound
MAX_TOKENS = 1000
PULL = "artifactregistry.repositories.downloadArtifacts"
PUSH = "artifactregistry.repositories.uploadArtifacts"
DELETE = "artifactregistry.repositories.deleteArtifacts"
_STATUS = {
    "UNAUTHORIZED": 401,
    "DENIED": 403,
    "NAME_UNKNOWN": 404,
    "NAME_INVALID": 400,
    "MANIFEST_UNKNOWN": 404,
    "BLOB_UNKNOWN": 404,
    "BLOB_UPLOAD_UNKNOWN": 404,
    "DIGEST_INVALID": 400,
    "MANIFEST_INVALID": 400,
    "MANIFEST_BLOB_UNKNOWN": 400,
    "TAG_INVALID": 400,
    "SIZE_INVALID": 400,
    "UNSUPPORTED": 405,
    "TOOMANYREQUESTS": 429,
}
_NAME = (
    r"/v2/(?P<name>(?P<location>[a-z0-9-]+?)-docker\.pkg\.dev/(?P<project>[a-z0-9.:-]+)"
    r"/(?P<repo>[a-z0-9-]+)/(?P<image>[a-z0-9]+(?:[._/-][a-z0-9]+)*))"
)
_ROUTES = [
    (re.compile(_NAME + r"/manifests/(?P<ref>[A-Za-z0-9_.:-]+)"), "manifest"),
    (re.compile(_NAME + r"/blobs/uploads/(?P<upload>[0-9a-f]*)"), "upload"),
    (re.compile(_NAME + r"/blobs/(?P<digest>[A-Za-z0-9:]+)"), "blob"),
    (re.compile(_NAME + r"/tags/list"), "tags"),
]
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


class RegistryError(Exception):
    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.headers = code, message, headers or {}

    def reply(self) -> Reply:
        body = {"errors": [{"code": self.code, "message": self.message, "detail": None}]}
        headers = {"Content-Type": "application/json", **self.headers}
        return Reply(_STATUS.get(self.code, 400), headers, json.dumps(body).encode())


@dataclass
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Path = b""  # a Path: a blob's file, streamed


@dataclass(frozen=True)
class Who:
    """Who calls: a VM's account (`principal`), the caller (None), or nobody."""

    principal: Any = None
    anonymous: bool = False


@dataclass
class Call:
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]  # lower-case names
    body: Callable[[], Iterable[bytes]]  # the request's body, in chunks, read once


class Distribution:
    """Answers the registry's calls. `apply(fn, *args)` runs `fn(state, *args)` under the
    backend's lock (and saves what changed); `principal(authorization)` is a VM's
    account behind a token; `address` is host:port of the registry's port."""

    def __init__(self, apply: Callable[..., Any], principal: Callable[[str], Any], blobs: Blobs):
        self._apply, self._principal, self.blobs = apply, principal, blobs
        self.address = ""
        self._tokens: dict[str, Who] = {}
        self._lock = threading.Lock()

    # -- auth --------------------------------------------------------------------------
    def _challenge(self, scope: str = "") -> dict[str, str]:
        value = f'Bearer realm="http://{self.address}/v2/token",service="{self.address}"'
        return {"WWW-Authenticate": value + (f',scope="{scope}"' if scope else "")}

    def _who(self, headers: Mapping[str, str], scope: str = "") -> Who:
        kind, _, credential = headers.get("authorization", "").partition(" ")
        credential = credential.strip()
        if kind.lower() == "basic":
            credential = _basic_token(credential)
        elif kind.lower() != "bearer":
            credential = ""
        if not credential:
            raise RegistryError("UNAUTHORIZED", "authentication required", self._challenge(scope))
        with self._lock:
            ours = self._tokens.get(credential)
        return ours or Who(self._principal(f"Bearer {credential}"))

    def token(self, headers: Mapping[str, str]) -> Reply:
        kind, _, credential = headers.get("authorization", "").partition(" ")
        if kind.lower() == "basic":
            access = _basic_token(credential.strip())
            if not access:
                raise RegistryError("UNAUTHORIZED", "the username must be oauth2accesstoken")
            who = Who(self._principal(f"Bearer {access}"))
        elif kind.lower() == "bearer" and credential.strip():
            who = Who(self._principal(f"Bearer {credential.strip()}"))
        else:
            who = Who(anonymous=True)
        token = f"ar-emulated-{secrets.token_urlsafe(24)}"
        with self._lock:
            if len(self._tokens) >= MAX_TOKENS:
                self._tokens.pop(next(iter(self._tokens)))
            self._tokens[token] = who
        answer = {"token": token, "access_token": token, "expires_in": 3600}
        return Reply(200, {"Content-Type": "application/json"}, json.dumps(answer).encode())

    # -- dispatch ----------------------------------------------------------------------
    def handle(self, call: Call) -> Reply:
        try:
            return self._handle(call)
        except RegistryError as exc:
            return exc.reply()
        except BlobError as exc:
            return RegistryError(exc.code, exc.message).reply()

    def _handle(self, call: Call) -> Reply:
        if call.path in ("/v2/", "/v2"):
            self._who(call.headers)
            return Reply(200, {"Content-Type": "application/json"}, b"{}")
        if call.path == "/v2/token":
            return self.token(call.headers)
        for pattern, kind in _ROUTES:
            match = pattern.fullmatch(call.path)
            if match:
                return self._route(kind, call, match.groupdict())
        raise RegistryError("NAME_INVALID", f"no image of LOCATION-docker.pkg.dev in {call.path}")

    def _route(self, kind: str, call: Call, parts: dict[str, str]) -> Reply:
        write = call.method not in ("GET", "HEAD")
        actions = "pull,push" if write else "pull"
        who = self._who(call.headers, f"repository:{parts['name']}:{actions}")
        permission = DELETE if call.method == "DELETE" else PUSH if write else PULL
        self._apply(_admit, parts, who, permission, write)
        name = parts["name"]
        if kind == "manifest":
            if call.method in ("GET", "HEAD"):
                return self._get_manifest(name, parts["ref"], call.method == "HEAD")
            if call.method == "PUT":
                return self._put_manifest(name, parts["ref"], call)
            if call.method == "DELETE":
                return self._delete_manifest(name, parts["ref"])
        elif kind == "blob" and call.method in ("GET", "HEAD"):
            return self._get_blob(name, parts["digest"], call.method == "HEAD")
        elif kind == "upload":
            return self._upload(name, parts["upload"], call)
        elif kind == "tags" and call.method == "GET":
            return self._tags(name, call.query)
        raise RegistryError("UNSUPPORTED", f"{call.method} is not supported on {call.path}")

    # -- manifests ---------------------------------------------------------------------
    def _get_manifest(self, name: str, ref: str, head: bool) -> Reply:
        found = self._apply(_resolve, name, ref)
        path = self.blobs.path(found[0]) if found else None
        if found is None or path is None:
            raise RegistryError("MANIFEST_UNKNOWN", f"manifest unknown: {name}:{ref}")
        digest, media_type = found
        headers = {"Content-Type": media_type, "Docker-Content-Digest": digest}
        headers["Content-Length"] = str(path.stat().st_size)
        return Reply(200, headers, b"" if head else path.read_bytes())

    def _put_manifest(self, name: str, ref: str, call: Call) -> Reply:
        data = _read_bounded(call.body(), MAX_MANIFEST, "MANIFEST_INVALID")
        media_type = call.headers.get("content-type", "").split(";")[0].strip()
        try:
            manifest = json.loads(data)
        except ValueError:
            raise RegistryError("MANIFEST_INVALID", "the manifest is not JSON") from None
        if not isinstance(manifest, dict):
            raise RegistryError("MANIFEST_INVALID", "the manifest is not a JSON object")
        media_type = media_type or str(manifest.get("mediaType", ""))
        if media_type not in MANIFEST_TYPES or manifest.get("mediaType", media_type) != media_type:
            raise RegistryError("MANIFEST_INVALID", f"unsupported manifest type {media_type!r}")
        digest = self.blobs.put(data)
        if DIGEST.fullmatch(ref) and ref != digest:
            raise RegistryError("DIGEST_INVALID", f"the manifest's digest is {digest}, not {ref}")
        if not DIGEST.fullmatch(ref) and not _TAG.fullmatch(ref):
            raise RegistryError("TAG_INVALID", f"invalid tag {ref!r}")
        wanted = _references(manifest, media_type)
        self._apply(_store_manifest, name, ref, digest, media_type, wanted)
        location = f"/v2/{name}/manifests/{digest}"
        return Reply(201, {"Location": location, "Docker-Content-Digest": digest})

    def _delete_manifest(self, name: str, ref: str) -> Reply:
        if not self._apply(_delete_manifest, name, ref):
            raise RegistryError("MANIFEST_UNKNOWN", f"manifest unknown: {name}:{ref}")
        return Reply(202)

    def _tags(self, name: str, query: Mapping[str, str]) -> Reply:
        tags = sorted(self._apply(_tags, name))
        tags = [t for t in tags if t > query["last"]] if query.get("last") else tags
        headers = {"Content-Type": "application/json"}
        size = int(query["n"]) if query.get("n", "").isdigit() else 0
        if 0 < size < len(tags):
            tags = tags[:size]
            link = f"/v2/{name}/tags/list?n={size}&last={quote(tags[-1])}"
            headers["Link"] = f'<{link}>; rel="next"'
        return Reply(200, headers, json.dumps({"name": name, "tags": tags}).encode())

    # -- blobs -------------------------------------------------------------------------
    def _get_blob(self, name: str, digest: str, head: bool) -> Reply:
        path = self.blobs.path(digest) if self._apply(_has_blob, name, digest) else None
        if path is None:
            raise RegistryError("BLOB_UNKNOWN", f"blob unknown to registry: {digest}")
        headers = {"Content-Type": "application/octet-stream", "Docker-Content-Digest": digest}
        headers["Content-Length"] = str(path.stat().st_size)
        return Reply(200, headers, b"" if head else path)

    def _upload(self, name: str, upload: str, call: Call) -> Reply:
        digest = call.query.get("digest", "")
        if call.method == "POST" and not upload:
            mount, source = call.query.get("mount", ""), call.query.get("from", "")
            repository = "/".join(name.split("/")[:3]) + "/"  # HOST/P/R/
            if (  # a mount from another image of the same repository (the same permission)
                mount
                and source.startswith(repository)
                and self.blobs.path(mount)
                and self._apply(_has_blob, source, mount)
            ):
                self._apply(_add_blob, name, mount)
                return _created(name, mount)
            upload = self.blobs.begin()
            if digest:  # monolithic: the body is the blob
                self.blobs.append(upload, call.body())
                return self._finish(name, upload, digest)
            return self._session(name, upload, 0)
        if not upload:
            raise RegistryError("BLOB_UPLOAD_UNKNOWN", "blob upload unknown to registry")
        if call.method == "GET":
            return self._session(name, upload, self.blobs.size(upload), 204)
        if call.method == "DELETE":
            self.blobs.size(upload)
            self.blobs.cancel(upload)
            return Reply(204)
        if call.method == "PATCH":
            size = self.blobs.append(upload, call.body())
            return self._session(name, upload, size)
        if call.method == "PUT":
            self.blobs.append(upload, call.body())
            return self._finish(name, upload, digest)
        raise RegistryError("UNSUPPORTED", f"{call.method} is not supported on an upload")

    def _finish(self, name: str, upload: str, digest: str) -> Reply:
        self.blobs.finish(upload, digest)
        self._apply(_add_blob, name, digest)
        return _created(name, digest)

    @staticmethod
    def _session(name: str, upload: str, size: int, status: int = 202) -> Reply:
        headers = {
            "Location": f"/v2/{name}/blobs/uploads/{upload}",
            "Docker-Upload-UUID": upload,
            "Range": f"0-{max(size - 1, 0)}",
        }
        return Reply(status, headers)


def _created(name: str, digest: str) -> Reply:
    headers = {"Location": f"/v2/{name}/blobs/{digest}", "Docker-Content-Digest": digest}
    return Reply(201, headers)


def _basic_token(credential: str) -> str:
    """The access token of Basic `oauth2accesstoken:<token>`; "" for anything else."""
    try:
        user, _, password = base64.b64decode(credential, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return ""
    return password if user == "oauth2accesstoken" else ""


def _read_bounded(chunks: Iterable[bytes], limit: int, code: str) -> bytes:
    data = b""
    for chunk in chunks:
        data += chunk
        if len(data) > limit:
            raise RegistryError(code, f"more than {limit} bytes")
    return data


def _references(manifest: dict[str, Any], media_type: str) -> list[tuple[str, str]]:
    """What a manifest names that must be in the image: ("manifest"|"blob", digest)."""
    try:
        if media_type in INDEXES:
            return [("manifest", str(m["digest"])) for m in manifest["manifests"]]
        layers = [str(layer["digest"]) for layer in manifest.get("layers", [])]
        return [("blob", d) for d in [str(manifest["config"]["digest"]), *layers]]
    except (KeyError, TypeError):
        raise RegistryError("MANIFEST_INVALID", "the manifest's descriptors lack digests") from None


# -- over the state, under the backend's lock (Distribution._apply) ---------------------
def _admit(state: Any, parts: dict[str, str], who: Who, permission: str, write: bool) -> None:
    project, location, repo = parts["project"], parts["location"], parts["repo"]
    resource = f"projects/{project}/locations/{location}/repositories/{repo}"
    access = state.access
    if not access.enabled(project, apis.ARTIFACT_REGISTRY):
        raise RegistryError(
            "DENIED",
            f"Artifact Registry API has not been used in project {project} before or it is "
            "disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
            f"artifactregistry.googleapis.com/overview?project={project} then retry.",
        )
    if who.anonymous:
        raise RegistryError(
            "DENIED",
            "Unauthenticated request. Unauthenticated requests do not have permission "
            f'"{permission}" on resource "{resource}" (or it may not exist)',
        )
    scoped = who.principal is None or scope_allows(who.principal.scopes, apis.STORAGE, write)
    if not scoped or permission in access.denied_to(who.principal):
        raise RegistryError(
            "DENIED",
            f'Permission "{permission}" denied on resource "{resource}" (or it may not exist)',
        )
    registry: Registry = state.registry
    if registry.repository(project, location, repo) is None:
        raise RegistryError("NAME_UNKNOWN", f'Repository "{repo}" not found')


def _resolve(state: Any, name: str, ref: str) -> tuple[str, str] | None:
    image = state.registry.image(name)
    if image is None:
        return None
    digest = ref if DIGEST.fullmatch(ref) else image["tags"].get(ref)
    media_type = image["manifests"].get(digest) if digest else None
    return (digest, media_type) if digest and media_type else None


def _store_manifest(
    state: Any, name: str, ref: str, digest: str, media_type: str, wanted: list[tuple[str, str]]
) -> None:
    image = state.registry.image(name, make=True)
    for kind, needed in wanted:
        if kind == "blob" and needed not in image["blobs"]:
            raise RegistryError("MANIFEST_BLOB_UNKNOWN", f"blob unknown to registry: {needed}")
        if kind == "manifest" and needed not in image["manifests"]:
            raise RegistryError("MANIFEST_UNKNOWN", f"manifest unknown: {name}@{needed}")
    image["manifests"][digest] = media_type
    if not DIGEST.fullmatch(ref):
        image["tags"][ref] = digest  # a moved tag: the manifest it named stays, by digest
    state.changed()


def _delete_manifest(state: Any, name: str, ref: str) -> bool:
    image = state.registry.image(name)
    if image is None:
        return False
    if not DIGEST.fullmatch(ref):  # a tag: untag only
        gone = image["tags"].pop(ref, None) is not None
    else:
        gone = image["manifests"].pop(ref, None) is not None
        image["tags"] = {t: d for t, d in image["tags"].items() if d != ref}
    state.changed()
    return gone


def _tags(state: Any, name: str) -> list[str]:
    image = state.registry.image(name)
    return list(image["tags"]) if image else []


def _has_blob(state: Any, name: str, digest: str) -> bool:
    image = state.registry.image(name)
    return bool(image) and (digest in image["blobs"] or digest in image["manifests"])


def _add_blob(state: Any, name: str, digest: str) -> None:
    image = state.registry.image(name, make=True)
    if digest not in image["blobs"]:
        image["blobs"].append(digest)
        state.changed()
