"""Artifact Registry's Docker API, as docker asks it to resolve an image: `GET /v2/`, the
Bearer challenge it answers 401 with, a registry token from the challenge's realm for
Basic `oauth2accesstoken:<access token>` (what `docker login -u oauth2accesstoken` sends,
https://cloud.google.com/artifact-registry/docs/docker/authentication#token), then the
manifest by tag or digest with docker's Accept list and the image config blob
(https://github.com/opencontainers/distribution-spec/blob/main/spec.md); for the doctor,
the layer blobs as streams of names (`layer_names`, image_layers.py).

Every body is read with a bound (a manifest or config over `MAX_MANIFEST` is refused) and
checked against its digest: a `Docker-Content-Digest` that is not the sha256 of the bytes
is refused, never believed. The token goes to the registry's own origin only (a realm
elsewhere is refused), and blob redirects (Artifact Registry answers with one to storage)
drop it, as `requests` does across hosts.

Plain `requests`: the registry's token is not a Google OAuth token, so google-auth's
AuthorizedSession does not apply. Where the registry is (Google's host, or the local
emulator's port under which an image keeps its real name) is the factory's to say
(`root(host)`: the base URL and the prefix of names under it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from tpuctl.cloud.image_layers import LayerNames, layers_of, member_names
from tpuctl.cloud.images import PULL_PERMISSION, READER_ROLE, ImageRef, ResolvedImage
from tpuctl.errors import CloudError, NotFoundError, PermissionDeniedError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
INDEXES = (OCI_INDEX, DOCKER_LIST)
MAX_MANIFEST = 4 << 20  # the distribution spec's bound on a manifest; a config too
TIMEOUT = 30.0
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class ImageRegistry:
    """Resolves images of Artifact Registry to digests, as the caller."""

    def __init__(
        self,
        root: Callable[[str], tuple[str, str]],
        access_token: Callable[[], str],
        account: Callable[[], str | None],
        where: str = "Artifact Registry",
        unreachable_hint: str = "",
    ) -> None:
        self._root = root  # host -> (base URL, prefix of names under it)
        self.access_token = access_token
        self._account = account
        self.where, self._hint = where, unreachable_hint

    def resolve(self, image: ImageRef) -> ResolvedImage:
        """`image`'s digest (the manifest its tag names now, or its own digest), with the
        linux/amd64 manifest of an index and the image config's Entrypoint, Cmd,
        WorkingDir and Env. One-line errors: NotFoundError (no such repository, image or
        tag), PermissionDeniedError (naming the permission and the caller), CloudError
        (unreachable, or an answer that does not check out)."""
        import requests

        base, prefix = self._root(image.host)
        with requests.Session() as session:
            call = _Calls(session, base, f"{prefix}{image.path}", image, self)
            call.authenticate()
            digest, media_type, manifest = call.manifest(image.reference)
            top, top_type = digest, media_type
            if media_type in INDEXES:
                chosen = _linux_amd64(manifest, image)
                digest, media_type, manifest = call.manifest(chosen)
            config_digest = _config_digest(manifest, image)
            config = call.config(config_digest).get("config") or {}
        return ResolvedImage(
            image=image,
            digest=top,
            media_type=top_type,
            manifest_digest=digest,
            config_digest=config_digest,
            entrypoint=_strings(config.get("Entrypoint")),
            cmd=_strings(config.get("Cmd")),
            working_dir=str(config.get("WorkingDir") or ""),
            env=_strings(config.get("Env")),
        )

    def layer_names(self, image: ResolvedImage, budget: int | None = None) -> LayerNames:
        """The member names of each of `image`'s layers (its linux/amd64 manifest's), read
        as streams (image_layers.py); none read when their compressed total is over
        `budget` bytes (None: no bound). Errors as `resolve`'s, and a layer that is not a
        gzip or plain tar, or not its digest's bytes, a CloudError."""
        import requests

        base, prefix = self._root(image.host)
        with requests.Session() as session:
            call = _Calls(session, base, f"{prefix}{image.repository}", image.image, self)
            call.authenticate()
            manifest = call.manifest(image.manifest_digest)[2]
            layers = layers_of(manifest, image.image)
            total = sum(layer.size for layer in layers)
            if budget is not None and total > budget:
                return LayerNames(total, None)
            names = []
            for layer in layers:
                with call.blob(layer.digest) as answer:
                    names.append(member_names(answer.raw, layer, image.image))
        return LayerNames(total, names)

    # what _Calls reports with
    def unreachable(self, image: ImageRef, exc: BaseException) -> CloudError:
        return CloudError(
            f"cannot reach {self.where} for {image}: {type(exc).__name__}",
            hint=self._hint or None,
        )

    def denied(self, image: ImageRef) -> PermissionDeniedError:
        who = self._account() or "your account"
        return PermissionDeniedError(
            f"permission denied pulling {image}: {who} lacks {PULL_PERMISSION} on "
            f"{image.repository_resource}",
            PULL_PERMISSION,
            hint=f"ask for {READER_ROLE} on the repository (or the project)",
        )


class _Calls:
    """The requests of one resolve: the token, then manifests and blobs with it."""

    def __init__(
        self, session: Any, base: str, name: str, image: ImageRef, owner: ImageRegistry
    ) -> None:
        self.session, self.base, self.name = session, base.rstrip("/"), name
        self.image, self.owner = image, owner
        self.headers: dict[str, str] = {}

    def _get(self, url: str, **kw: Any) -> Any:
        import requests

        try:
            return self.session.get(url, timeout=TIMEOUT, stream=True, **kw)
        except requests.RequestException as exc:
            raise self.owner.unreachable(self.image, exc) from None

    def authenticate(self) -> None:
        """The token dance: `/v2/` answers 200 (no auth) or 401 with a Bearer challenge,
        whose realm trades the access token for a registry token."""
        with self._get(f"{self.base}/v2/") as answer:
            if answer.status_code == 200:
                return
            challenge = answer.headers.get("Www-Authenticate", "")
            if answer.status_code != 401 or not challenge.lower().startswith("bearer "):
                raise self._unexpected(answer)
        fields = dict(_CHALLENGE.findall(challenge))
        realm = fields.get("realm", "")
        if _origin(realm) != _origin(self.base):  # the token goes nowhere else
            raise CloudError(
                f"{self.owner.where} sent {self.image}'s token request to {realm!r}, "
                f"not {_origin(self.base)}: refused"
            )
        basic = base64.b64encode(f"oauth2accesstoken:{self.owner.access_token()}".encode())
        params = {"scope": f"repository:{self.name}:pull"}
        if fields.get("service"):
            params["service"] = fields["service"]
        auth = {"Authorization": f"Basic {basic.decode()}"}
        with self._get(realm, params=params, headers=auth) as answer:
            if answer.status_code in (401, 403):
                raise self.owner.denied(self.image)
            if answer.status_code != 200:
                raise self._unexpected(answer)
            body = self._json(self._bounded(answer), "token answer")
        token = body.get("token") or body.get("access_token")
        if not isinstance(token, str) or not token:
            raise CloudError(f"{self.owner.where} gave no token for {self.image}")
        self.headers = {"Authorization": f"Bearer {token}"}

    def manifest(self, reference: str) -> tuple[str, str, dict[str, Any]]:
        """(digest, media type, manifest) of `reference`, its bytes checked."""
        url = f"{self.base}/v2/{self.name}/manifests/{reference}"
        with self._get(url, headers={**self.headers, "Accept": ACCEPT}) as answer:
            if answer.status_code != 200:
                raise self._refused(answer, reference)
            data = self._bounded(answer)
            media_type = answer.headers.get("Content-Type", "").split(";")[0].strip()
            told = answer.headers.get("Docker-Content-Digest", "")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        expected = [d for d in (told, reference if reference.startswith("sha256:") else "") if d]
        if any(d != digest for d in expected):
            raise CloudError(
                f"{self.owner.where} answered {self.image}'s manifest with bytes whose "
                f"digest is {digest}, not {' / '.join(expected)}: refused"
            )
        manifest = self._json(data, "manifest")
        media_type = str(manifest.get("mediaType") or media_type)
        return digest, media_type, manifest

    def config(self, digest: str) -> dict[str, Any]:
        """The image config blob, its bytes checked against `digest`."""
        url = f"{self.base}/v2/{self.name}/blobs/{digest}"
        with self._get(url, headers=self.headers) as answer:
            if answer.status_code != 200:
                raise self._refused(answer, digest)
            data = self._bounded(answer)
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise CloudError(
                f"{self.owner.where} answered {self.image}'s config {digest} with other "
                "bytes: refused"
            )
        return self._json(data, "image config")

    def blob(self, digest: str) -> Any:
        """The answer for the blob `digest`, its body unread (the caller streams it)."""
        answer = self._get(f"{self.base}/v2/{self.name}/blobs/{digest}", headers=self.headers)
        if answer.status_code != 200:
            with answer:
                raise self._refused(answer, digest)
        return answer

    def _bounded(self, answer: Any) -> bytes:
        told = answer.headers.get("Content-Length", "")
        too_big = CloudError(
            f"{self.image}: the registry's answer is over {MAX_MANIFEST >> 20} MiB: refused"
        )
        if told.isdigit() and int(told) > MAX_MANIFEST:
            raise too_big
        data = bytearray()
        for chunk in answer.iter_content(65536):
            data += chunk
            if len(data) > MAX_MANIFEST:
                raise too_big
        return bytes(data)

    def _json(self, data: bytes, what: str) -> dict[str, Any]:
        try:
            found = json.loads(data)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise CloudError(f"{self.image}: the registry's {what} is not a JSON object")
        return found

    def _refused(self, answer: Any, reference: str) -> Exception:
        code = _error_code(answer)
        image = self.image
        if answer.status_code in (401, 403) or code in ("DENIED", "UNAUTHORIZED"):
            return self.owner.denied(image)
        if code == "NAME_UNKNOWN":
            return NotFoundError(
                f"image not found: {image}: repository {image.repository_resource} does not exist"
            )
        if answer.status_code == 404 or code in ("MANIFEST_UNKNOWN", "BLOB_UNKNOWN"):
            if reference.startswith("sha256:") or not self._has_tags():
                return NotFoundError(f"image not found: {image} is not in the registry")
            return NotFoundError(f"tag not found: {image} has no tag {reference!r}")
        return self._unexpected(answer)

    def _has_tags(self) -> bool:
        """Whether the image has any tag (a missing tag of an image, or no image)."""
        url = f"{self.base}/v2/{self.name}/tags/list"
        with self._get(url, headers=self.headers, params={"n": "1"}) as answer:
            if answer.status_code != 200:
                return False
            try:
                return bool(json.loads(self._bounded(answer)).get("tags"))
            except (ValueError, AttributeError):
                return False

    def _unexpected(self, answer: Any) -> CloudError:
        code = _error_code(answer) or f"HTTP {answer.status_code}"
        return CloudError(f"{self.owner.where} refused {self.image}: {code}")


def _error_code(answer: Any) -> str:
    """The distribution spec's first error code of a refusal, if its body says one."""
    try:
        data = answer.raw.read(65536, decode_content=True) if answer.raw else b""
        errors = json.loads(data).get("errors") or [{}]
        return str(errors[0].get("code") or "")
    except (ValueError, AttributeError, TypeError, OSError):
        return ""


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _linux_amd64(index: dict[str, Any], image: ImageRef) -> str:
    """The digest of an index's linux/amd64 manifest (what a TPU VM runs)."""
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") if isinstance(entry, dict) else None
        if isinstance(platform, dict) and (platform.get("os"), platform.get("architecture")) == (
            "linux",
            "amd64",
        ):
            digest = str(entry.get("digest") or "")
            if re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
                return digest
    raise NotFoundError(f"image not found: {image} has no linux/amd64 image (a TPU VM's)")


def _config_digest(manifest: dict[str, Any], image: ImageRef) -> str:
    config = manifest.get("config")
    digest = str(config.get("digest") or "") if isinstance(config, dict) else ""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise CloudError(f"{image}: the manifest names no sha256 config digest")
    return digest


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
