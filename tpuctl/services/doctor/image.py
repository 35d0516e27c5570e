"""The doctor for a container image (`run --image`): whether its Python has a TPU runtime,
read from the names in its layers (no layer is unpacked, nothing runs), and whether the
VM's service account may pull it. Findings as a script's, at the image (line 0).

A TPU runtime is libtpu (the `libtpu` package, what `jax[tpu]` installs), PyTorch/XLA, or
a TensorFlow TPU build (TensorFlow with libtpu, or `tensorflow-tpu`), in a `site-packages`
or `dist-packages` folder of the merged layers: a later layer's OCI whiteout (`.wh.NAME`,
`.wh..wh..opq`) deletes what the layers below it have
(https://github.com/opencontainers/image-spec/blob/main/layer.md#whiteouts). A verdict is
kept by the image's manifest digest in tpuctl's cache folder: an image is read once.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.cloud.images import PULL_PERMISSION, READER_ROLE, ResolvedImage, pull_access
from tpuctl.errors import CloudError
from tpuctl.services.doctor.findings import Finding, Severity

if TYPE_CHECKING:
    from tpuctl.cloud.iam import IamApi
    from tpuctl.cloud.image_registry import ImageRegistry

LAYER_BUDGET = 2 << 30  # compressed bytes the run gate reads; `doctor --image`: no bound
CONTAINER_DOC = "https://cloud.google.com/tpu/docs/run-in-container"
JAX_DOC = "https://docs.jax.dev/en/latest/installation.html#google-cloud-tpu"
_SITE = re.compile(r"^(.*?(?:^|/)(?:site|dist)-packages)/([^/]+)")
_DIST_INFO = re.compile(r"^([A-Za-z0-9_.]+)-([^-]+)\.dist-info$")
_TOPS = ("libtpu", "jax", "jaxlib", "torch_xla", "tensorflow")
# the distributions whose version names a framework
_DISTS = {
    "libtpu": ("libtpu", "libtpu_nightly"),
    "jax": ("jax",),
    "torch_xla": ("torch_xla",),
    "tensorflow": ("tensorflow", "tensorflow_tpu", "tensorflow_cpu", "tf_nightly"),
}


@dataclass(frozen=True)
class ImageReport:
    """What the doctor found in an image: its findings, and the frameworks its Python has
    with their versions ("" when no dist-info names one; None: the layers were not read)."""

    findings: list[Finding]
    frameworks: dict[str, str] | None


def check_image(
    images: ImageRegistry,
    iam: IamApi | None,
    image: ResolvedImage,
    project: str,
    service_account: str | None = None,
    budget: int | None = LAYER_BUDGET,
    cache: Path | None = None,
) -> ImageReport:
    """What the doctor finds in `image` for a TPU VM of `project` whose service account
    is `service_account` (None: the project's default compute account; `iam` None: the
    account is not checked): its findings (errors stop `run`, as a script's) and the
    frameworks of its Python. Layers over `budget` compressed bytes are not read (a
    warning saying so; None: no bound); a verdict read is kept in `cache` (default: the
    cache folder's `images/`) by the image's manifest digest."""
    ref = str(image.image)
    findings: list[Finding] = []
    if iam is not None:
        findings += _pull_findings(iam, image, project, service_account)
    frameworks = _frameworks(images, image, budget, cache, findings)
    if frameworks is not None:
        findings += runtime_findings(ref, frameworks)
    return ImageReport(sorted(findings, key=Finding.sort_key), frameworks)


def _finding(
    image: ResolvedImage, severity: Severity, check: str, message: str, fix: str
) -> Finding:
    return Finding(str(image.image), 0, severity, check, message, fix)


def _pull_findings(
    iam: IamApi, image: ResolvedImage, project: str, account: str | None
) -> list[Finding]:
    ref = str(image.image)
    try:
        if account is None:
            account = f"{iam.project_number(project)}-compute@developer.gserviceaccount.com"
        access = pull_access(iam, image.image, account)
    except CloudError as exc:
        who = account or f"the default compute account of {project}"
        message = f"could not check whether the VM's service account {who} can pull {ref}: {exc}"
        fix = f"make sure it holds {READER_ROLE} on the repository ({PULL_PERMISSION})"
        return [_finding(image, "warning", "image-pull-unknown", message, fix)]
    if access.granted:
        return []
    if access.granted is False:
        message = (
            f"the VM's service account {account} cannot pull {ref} (it lacks "
            f"{PULL_PERMISSION}, e.g. {READER_ROLE} on the repository)"
        )
        return [_finding(image, "error", "image-pull-denied", message, access.hint)]
    message = f"could not check whether the VM's service account can pull: {access.message}"
    return [_finding(image, "warning", "image-pull-unknown", message, access.hint)]


def _frameworks(
    images: ImageRegistry,
    image: ResolvedImage,
    budget: int | None,
    cache: Path | None,
    findings: list[Finding],
) -> dict[str, str] | None:
    """The frameworks of the image's Python: from the cache, else read from its layers
    (and kept); None, with a warning in `findings`, when they were not read."""
    ref = str(image.image)
    path = _cache_path(cache, image.manifest_digest)
    kept = _read_cache(path)
    if kept is not None:
        return kept
    try:
        read = images.layer_names(image, budget)
    except CloudError as exc:
        message = f"{ref} not checked: its layers could not be read: {exc}"
        fix = f"tpuctl doctor --image {ref} once the registry serves it"
        findings.append(_finding(image, "warning", "image-not-checked", message, fix))
        return None
    if read.layers is None:
        size = f"{read.total / 1e9:.1f} GB" if read.total >= 1e8 else f"{read.total} bytes"
        message = (
            f"{ref} not checked: the image's layers are {size}; "
            "tpuctl doctor --image checks it whole"
        )
        fix = f"tpuctl doctor --image {ref}"
        findings.append(_finding(image, "warning", "image-not-checked", message, fix))
        return None
    found = frameworks_of(read.layers)
    _write_cache(path, found)
    return found


def frameworks_of(layers: list[list[str]]) -> dict[str, str]:
    """The TPU-relevant frameworks of the merged layers (lowest first), by name
    (libtpu, jax, torch_xla, tensorflow, tensorflow_tpu) with versions or ""."""
    tops = merged_packages(layers)
    versions: dict[str, str] = {}
    for top in tops:
        named = _DIST_INFO.match(top)
        if named:
            versions.setdefault(named.group(1).lower().replace(".", "_"), named.group(2))
    found: dict[str, str] = {}
    for name, dists in _DISTS.items():
        has_dist = any(d in versions for d in dists)
        present = name in tops and (name != "jax" or "jaxlib" in tops)
        if present or (name == "libtpu" and has_dist):
            found[name] = next((versions[d] for d in dists if d in versions), "")
    if "tensorflow" in found and "tensorflow_tpu" in versions:
        found["tensorflow_tpu"] = versions["tensorflow_tpu"]
    return found


def merged_packages(layers: list[list[str]]) -> set[str]:
    """The top-level entries (packages, dist-infos) of every site-packages folder in the
    image's merged file system, whiteouts applied layer over layer."""
    present: set[str] = set()  # SITE/TOP paths, of the layers so far
    for names in layers:
        added: set[str] = set()
        for name in names:
            folder, base = posixpath.split(name)
            if base == ".wh..wh..opq":
                present = {p for p in present if not p.startswith(f"{folder}/")}
            elif base.startswith(".wh."):
                gone = posixpath.join(folder, base[4:])
                present = {p for p in present if p != gone and not p.startswith(f"{gone}/")}
            else:
                site = _SITE.match(name)
                if site and _relevant(site.group(2)):
                    added.add(f"{site.group(1)}/{site.group(2)}")
        present |= added
    return {p.rsplit("/", 1)[1] for p in present}


def _relevant(top: str) -> bool:
    return top in _TOPS or (
        top.endswith(".dist-info")
        and top.lower().startswith(("libtpu", "jax", "torch_xla", "tensorflow", "tf_nightly"))
    )


def runtime_findings(ref: str, found: dict[str, str]) -> list[Finding]:
    """The errors of an image whose frameworks are `found`: no TPU runtime, or JAX
    without libtpu."""
    libtpu = "libtpu" in found
    tf_tpu = "tensorflow" in found and (libtpu or "tensorflow_tpu" in found)
    out = []
    if "jax" in found and not libtpu:
        pin = f"=={found['jax']}" if found["jax"] else ""
        message = (
            f"{ref} has jax{' ' + found['jax'] if found['jax'] else ''} but no libtpu: jax "
            "without the [tpu] extra installs no libtpu, so JAX runs on the host CPU"
        )
        fix = f'in the Dockerfile: RUN pip install -U "jax[tpu]{pin}" ({JAX_DOC})'
        out.append(Finding(ref, 0, "error", "image-jax-no-libtpu", message, fix))
    elif not (libtpu or "torch_xla" in found or tf_tpu):
        has = ", ".join(f"{n} {v}".strip() for n, v in found.items())
        message = (
            f"{ref} has no libtpu (jax[tpu]), torch_xla or TensorFlow TPU build: on a TPU VM "
            f"its Python finds no TPU{f' (it has {has})' if has else ''}"
        )
        fix = (
            'in the Dockerfile, RUN pip install -U "jax[tpu]" (JAX), "torch_xla[tpu]" '
            "(PyTorch/XLA) or tensorflow-tpu -f "
            f"https://storage.googleapis.com/libtpu-tf-releases/index.html ({CONTAINER_DOC})"
        )
        out.append(Finding(ref, 0, "error", "image-no-tpu-runtime", message, fix))
    return out


def _cache_path(cache: Path | None, digest: str) -> Path:
    if cache is None:
        from tpuctl.config import cache_dir

        cache = cache_dir() / "images"
    return cache / f"{digest.replace(':', '-')}.json"


def _read_cache(path: Path) -> dict[str, str] | None:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = kept.get("frameworks") if isinstance(kept, dict) else None
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in found.items()
    ):
        return None
    return found


def _write_cache(path: Path, found: dict[str, str]) -> None:
    """Kept for the next check (a cache: a failure to write is not an error)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(f".{os.getpid()}.part")
        part.write_text(json.dumps({"frameworks": found}, sort_keys=True), encoding="utf-8")
        os.replace(part, path)
    except OSError:
        pass
