"""An image's layers as names: each layer blob (a gzip or plain tar) streamed through
`tarfile` in stream mode, member names kept and contents skipped, its bytes counted and
hashed as they pass; a blob longer than its descriptor says, or whose sha256 is not its
digest, is refused. Nothing is written to disk or held beyond the names
(https://github.com/opencontainers/image-spec/blob/main/layer.md).
"""

from __future__ import annotations

import hashlib
import re
import tarfile
import zlib
from dataclasses import dataclass
from typing import Any

from tpuctl.cloud.images import ImageRef
from tpuctl.errors import CloudError

_CHUNK = 1 << 20
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Layer:
    """One layer of an image manifest, as its descriptor says."""

    digest: str
    size: int
    media_type: str


@dataclass(frozen=True)
class LayerNames:
    """An image's layers: their compressed `total` in bytes, and the member names of each,
    lowest first (None: not read, the total being over the caller's budget)."""

    total: int
    layers: list[list[str]] | None


def layers_of(manifest: dict[str, Any], image: ImageRef) -> list[Layer]:
    """The layer descriptors of an image manifest, checked to be sha256 digests and sizes."""
    found = []
    for entry in manifest.get("layers") or []:
        digest = str(entry.get("digest") or "") if isinstance(entry, dict) else ""
        size = entry.get("size") if isinstance(entry, dict) else None
        if not _DIGEST.fullmatch(digest) or not isinstance(size, int) or size < 0:
            raise CloudError(f"{image}: the manifest has a layer with no sha256 digest or size")
        found.append(Layer(digest, size, str(entry.get("mediaType") or "")))
    return found


class _Checked:
    """A blob's body read through: counted against its size, hashed as it goes."""

    def __init__(self, raw: Any, layer: Layer, image: ImageRef) -> None:
        self.raw, self.layer, self.image = raw, layer, image
        self.hash, self.read_bytes = hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(_CHUNK if size is None or size < 0 else size, decode_content=False)
        self.read_bytes += len(data)
        if self.read_bytes > self.layer.size:
            raise CloudError(
                f"{self.image}: layer {self.layer.digest} is longer than its {self.layer.size} "
                "bytes: refused"
            )
        self.hash.update(data)
        return bytes(data)

    def finish(self) -> None:
        while self.read(_CHUNK):
            pass
        if "sha256:" + self.hash.hexdigest() != self.layer.digest:
            raise CloudError(
                f"{self.image}: the registry answered layer {self.layer.digest} with other "
                "bytes: refused"
            )


def member_names(raw: Any, layer: Layer, image: ImageRef) -> list[str]:
    """The names in the layer blob `raw` streams (a urllib3 response), `./` and `/`
    stripped; the blob read to its end and checked against its digest."""
    body = _Checked(raw, layer, image)
    names = []
    try:
        with tarfile.open(fileobj=body, mode="r|*") as tar:  # type: ignore[call-overload]
            for member in tar:
                name = member.name
                while name.startswith(("./", "/")):
                    name = name[2:] if name.startswith("./") else name[1:]
                if name and name != ".":
                    names.append(name.rstrip("/"))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        kind = layer.media_type or "a layer"
        raise CloudError(
            f"{image}: layer {layer.digest} ({kind}) is not a gzip or plain tar tpuctl can "
            f"read: {type(exc).__name__}"
        ) from None
    body.finish()
    return names
