"""A worker's container images (containers.py): pulled through the emulator's registry
with the credentials `docker` sends, unpacked once per worker.

An image keeps its real name (`LOCATION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG`); the
host is the emulator's registry endpoint, as the registry names it (registry/
distribution.py), reached with Docker's token flow, so the registry's own checks (the
token's account and scopes) decide. Any other host is not reachable, as from a VM
without outside network.

Layers are applied in order, gzip or plain tar, with OCI whiteouts (`.wh.NAME` removes
NAME of the layers below, `.wh..wh..opq` empties its folder); a path or hard link that
leads out of the image's root is refused, symlinks are followed as in the image's root,
device nodes are skipped and setuid/setgid bits dropped. The store is the worker's
`<node dir>/w<k>-docker/` (beside the worker's folder, so that nothing on the worker
changes it while the emulator unpacks): `images/<hex>/rootfs` and `config.json`, and
`refs.json` (name:tag or name@digest -> manifest digest).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

_HOST = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev$")
_REF = re.compile(
    r"^(?P<name>[a-z0-9.:-]+(?:/[a-z0-9._-]+)+?)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)
_CHUNK = 1 << 20
_MAX_LINKS = 40


class ImageError(Exception):
    """What `docker` says after `Error response from daemon: `."""


def parse(image: str) -> tuple[str, str, str]:
    """(name, reference: tag or digest, canonical name:tag / name@digest) of `image`."""
    found = _REF.match(image)
    if not found or "/" not in image:
        raise ImageError(f'invalid reference format: repository name "{image}" must be lowercase')
    name, tag, digest = found["name"], found["tag"], found["digest"]
    if digest:
        return name, digest, f"{name}@{digest}"
    return name, tag or "latest", f"{name}:{tag or 'latest'}"


def resolve(root: str, path: str, follow_last: bool = False) -> str:
    """The machine's path of `path` in the image root `root`, the symlinks on the way
    followed as the root would (never out of it)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    current, links = root, 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = root if current == root else os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if (parts or follow_last) and os.path.islink(candidate):
            links += 1
            if links > _MAX_LINKS:
                raise ImageError(f"too many levels of symbolic links: {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = root
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        current = candidate
    return current


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def apply_layer(root: str, layer: Path) -> None:
    """Apply one layer (a tar, gzip'd or not) to the image root `root`."""
    with tarfile.open(layer, "r:*") as tar:
        members = tar.getmembers()
        for member in members:  # whiteouts hide what the layers below have
            parent, base = os.path.split(member.name.strip("/"))
            if base == ".wh..wh..opq":
                folder = resolve(root, parent, follow_last=True)
                for entry in os.listdir(folder) if os.path.isdir(folder) else ():
                    _remove(os.path.join(folder, entry))
            elif base.startswith(".wh."):
                _remove(resolve(root, os.path.join(parent, base[4:])))
        for member in members:
            if os.path.basename(member.name.strip("/")).startswith(".wh."):
                continue
            _extract(tar, member, root)


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, root: str) -> None:
    name = os.path.normpath(member.name.lstrip("/"))
    if name == ".." or name.startswith("../"):
        raise ImageError(f"invalid layer: {member.name} leads out of the image's root")
    if name == "." or member.ischr() or member.isblk():
        return
    target = resolve(root, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target) and not (member.isdir() and os.path.isdir(target)):
        _remove(target)
    if member.isdir():
        os.makedirs(target, exist_ok=True)
    elif member.issym():
        os.symlink(member.linkname, target)
    elif member.islnk():
        link = os.path.normpath(member.linkname.lstrip("/"))
        source = resolve(root, link)
        bad = link == ".." or link.startswith("../") or os.path.islink(source)
        if bad or not os.path.isfile(source):
            raise ImageError(f"invalid hard link in layer: {member.name} -> {member.linkname}")
        os.link(source, target)
        return
    elif member.isfifo():
        os.mkfifo(target)
    else:
        data = tar.extractfile(member)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with open(os.open(target, flags, 0o600), "wb") as out:
            if data is not None:
                shutil.copyfileobj(data, out, _CHUNK)
    if os.geteuid() == 0:
        os.chown(target, member.uid, member.gid, follow_symlinks=False)
    if not member.issym():
        os.chmod(target, member.mode & 0o1777)
    os.utime(target, (member.mtime, member.mtime), follow_symlinks=False)


class Registry:
    """Docker's token flow and the reads of one pull from the emulator's registry."""

    def __init__(self, endpoint: str, name: str, auth: str | None) -> None:
        self.endpoint, self.name = endpoint, name
        host, port = endpoint.rsplit(":", 1)
        self._conn = (host, int(port))
        self._headers: dict[str, str] = {}
        scope = "&scope=" + quote(f"repository:{name}:pull", safe=":/") if name else ""
        basic = {"Authorization": f"Basic {auth}"} if auth else {}
        status, _, body = self._get(f"/v2/token?service={endpoint}{scope}", basic)
        if status != 200:
            raise ImageError(f'Get "https://{name.split("/")[0]}/v2/": {_error(body)}')
        self._headers = {"Authorization": f"Bearer {json.loads(body)['token']}"}

    def _get(self, path: str, headers: dict[str, str], to: Any = None) -> tuple[int, Any, bytes]:
        conn = http.client.HTTPConnection(*self._conn, timeout=60)
        try:
            conn.request("GET", path, headers={**self._headers, **headers})
            response = conn.getresponse()
            if to is None or response.status != 200:
                return response.status, response, response.read()
            while chunk := response.read(_CHUNK):
                to(chunk)
            return response.status, response, b""
        finally:
            conn.close()

    def manifest(self, ref: str) -> tuple[str, dict[str, Any]]:
        status, response, body = self._get(f"/v2/{self.name}/manifests/{ref}", {"Accept": _ACCEPT})
        if status != 200:
            raise ImageError(_refusal(self.name, ref, body))
        return "sha256:" + hashlib.sha256(body).hexdigest(), json.loads(body)

    def blob(self, digest: str, path: Path) -> None:
        sha = hashlib.sha256()
        with open(path, "wb") as out:

            def write(chunk: bytes) -> None:
                sha.update(chunk)
                out.write(chunk)

            status, _, body = self._get(f"/v2/{self.name}/blobs/{digest}", {}, write)
        if status != 200:
            raise ImageError(f"blob {digest}: {_error(body)}")
        if "sha256:" + sha.hexdigest() != digest:
            raise ImageError(f"digest mismatch for blob {digest}")


def _error(body: bytes) -> str:
    try:
        error = json.loads(body)["errors"][0]
        return f"{error['code'].lower().replace('_', ' ')}: {error['message']}"
    except (ValueError, KeyError, IndexError, TypeError):
        return body.decode(errors="replace")[:200] or "no answer"


def _refusal(name: str, ref: str, body: bytes) -> str:
    """Docker's words for a manifest the registry does not give."""
    said = _error(body)
    if said.startswith("manifest unknown"):
        sep = "@" if ref.startswith("sha256:") else ":"
        return f"manifest for {name}{sep}{ref} not found: {said}"
    host, _, path = name.partition("/")
    return f'Head "https://{host}/v2/{path}/manifests/{ref}": {said}'


class Store:
    """The images of one worker."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._dropped = False

    def drop(self) -> None:
        """Every image gone with the worker's VM, once a pull under way has ended, and none
        pulled after (a new VM's docker starts empty)."""
        with self._lock:
            self._dropped = True
            shutil.rmtree(self.folder, ignore_errors=True)

    def _refs(self) -> dict[str, str]:
        try:
            return dict(json.loads((self.folder / "refs.json").read_text()))
        except (OSError, ValueError):
            return {}

    def image(self, image: str) -> Path | None:
        """The folder of a pulled image (rootfs, config.json), None if not here."""
        try:
            canonical = parse(image)[2]
        except ImageError:
            return None
        digest = self._refs().get(canonical)
        path = self.folder / "images" / digest.split(":")[-1] if digest else None
        return path if path is not None and (path / "config.json").is_file() else None

    def pull(
        self, image: str, auth: str | None, endpoint: str | None, say: Callable[[str], None]
    ) -> str:
        """Pull `image` (once: later pulls only check the registry); returns its folder's
        manifest digest. `say`: docker's progress lines."""
        name, ref, canonical = parse(image)
        if not _HOST.match(name.split("/")[0]) or endpoint is None:
            host = name.split("/")[0]
            raise ImageError(f'Get "https://{host}/v2/": dial tcp: lookup {host}: no such host')
        if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
            say("Using default tag: latest")
        registry = Registry(endpoint, name, auth)
        digest, manifest = registry.manifest(ref)
        if "manifests" in manifest:  # an index: this machine's platform, as docker picks it
            chosen = [
                m
                for m in manifest["manifests"]
                if m.get("platform", {}).get("architecture") in ("amd64", None)
            ] or manifest["manifests"]
            digest, manifest = registry.manifest(chosen[0]["digest"])
        say(f"{ref}: Pulling from {name.split('/', 1)[1]}")
        with self._lock:
            if self._dropped:  # the VM is being deleted
                raise ImageError("the daemon is shutting down")
            folder = self.folder / "images" / digest.split(":")[1]
            fresh = not (folder / "config.json").is_file()
            if fresh:
                self._unpack(registry, manifest, folder, say)
            refs = self._refs()
            refs[canonical] = digest
            refs[f"{name}@{digest}"] = digest
            tmp = self.folder / "refs.json.tmp"
            tmp.write_text(json.dumps(refs))
            os.replace(tmp, self.folder / "refs.json")
        say(f"Digest: {digest}")
        status = "Downloaded newer image" if fresh else "Image is up to date"
        say(f"Status: {status} for {image}")
        say(image)
        return digest

    def _unpack(self, registry: Registry, manifest: dict[str, Any], folder: Path, say: Any) -> None:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".pull-") as work:
            rootfs = os.path.join(work, "image", "rootfs")
            os.makedirs(rootfs)
            config = Path(work) / "config"
            registry.blob(manifest["config"]["digest"], config)
            for layer in manifest.get("layers", []):
                short = layer["digest"].split(":")[1][:12]
                say(f"{short}: Pulling fs layer")
                blob = Path(work) / "layer"
                registry.blob(layer["digest"], blob)
                say(f"{short}: Download complete")
                try:
                    apply_layer(rootfs, blob)
                except (OSError, tarfile.TarError) as exc:
                    raise ImageError(f"failed to register layer: {exc}") from exc
                blob.unlink()
                say(f"{short}: Pull complete")
            os.replace(config, os.path.join(work, "image", "config.json"))
            _remove(str(folder))
            os.replace(os.path.join(work, "image"), folder)


def config_of(folder: Path) -> dict[str, Any]:
    """The image config's `config` object (Entrypoint, Cmd, Env, WorkingDir, User)."""
    found = json.loads((folder / "config.json").read_text()).get("config")
    return found if isinstance(found, dict) else {}


def login(endpoint: str | None, host: str, auth: str) -> None:
    """`docker login HOST` with `auth` (base64 user:token): the registry's token flow,
    then /v2/ with the token, as docker checks credentials."""
    if not _HOST.match(host) or endpoint is None:
        raise ImageError(f'Get "https://{host}/v2/": dial tcp: lookup {host}: no such host')
    registry = Registry(endpoint, "", auth)
    status, _, body = registry._get("/v2/", {})
    if status != 200:
        raise ImageError(f"login attempt to https://{host}/v2/ failed with status: {status}")
