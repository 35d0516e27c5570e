"""Container images in Artifact Registry: what an image reference names (`parse_image`),
what it resolves to (`ResolvedImage`, made by `image_registry.ImageRegistry.resolve`), and
whether a TPU VM's service account may pull it (`pull_access`).

An image is `LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE[:TAG|@sha256:HEX]`
(https://cloud.google.com/artifact-registry/docs/docker/names); a TPU VM pulls it as its
service account, which needs `artifactregistry.repositories.downloadArtifacts` on the
repository: roles/artifactregistry.reader has it, as do writer, repoAdmin and admin, and
the basic roles owner, editor and viewer
(https://cloud.google.com/artifact-registry/docs/access-control#roles). Images of other
registries (Docker Hub, gcr.io, ...) are refused: a VM's account token opens Artifact
Registry alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tpuctl.errors import UsageError

if TYPE_CHECKING:
    from tpuctl.cloud.iam import IamApi

PULL_PERMISSION = "artifactregistry.repositories.downloadArtifacts"
READER_ROLE = "roles/artifactregistry.reader"
ROLES_DOC = "https://cloud.google.com/artifact-registry/docs/access-control#roles"
FORM = "LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE[:TAG|@sha256:DIGEST]"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"  # the distribution spec's path part
_REFERENCE = re.compile(
    r"(?P<location>[a-z]+(?:-[a-z]+[0-9]+)?)-docker\.pkg\.dev"
    r"/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])"
    r"/(?P<repository>[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?)"
    rf"/(?P<image>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class ImageRef:
    """One image of Artifact Registry, by tag or by digest (a digest wins over a tag)."""

    location: str  # us, europe-west4, ...
    project: str
    repository: str
    image: str  # may hold slashes: team/trainer
    tag: str | None = None  # "latest" when neither is given, as docker has it
    digest: str | None = None  # sha256:HEX

    @property
    def host(self) -> str:
        """The registry's host: `us-docker.pkg.dev`."""
        return f"{self.location}-docker.pkg.dev"

    @property
    def path(self) -> str:
        """The image's repository path under the host: `PROJECT/REPOSITORY/IMAGE`."""
        return f"{self.project}/{self.repository}/{self.image}"

    @property
    def reference(self) -> str:
        """What the manifest is asked by: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def repository_resource(self) -> str:
        """Artifact Registry's name of the repository: projects/P/locations/L/repositories/R."""
        return f"projects/{self.project}/locations/{self.location}/repositories/{self.repository}"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.host}/{self.path}{tag}{digest}"


@dataclass(frozen=True)
class ResolvedImage:
    """An image reference resolved to its digest, with what a worker needs to pull and
    run it: `pinned` is what every worker pulls (the tag is never asked again)."""

    image: ImageRef  # as given
    digest: str  # of the manifest the reference names (an index's, for a multi-platform image)
    media_type: str
    manifest_digest: str  # the linux/amd64 image manifest's (== digest unless an index)
    config_digest: str
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    working_dir: str = ""
    env: list[str] = field(default_factory=list)  # KEY=VALUE, as the image config has them

    @property
    def host(self) -> str:
        """The registry host the worker pulls from (the real one): us-docker.pkg.dev."""
        return self.image.host

    @property
    def repository(self) -> str:
        """The image's path under the host: PROJECT/REPOSITORY/IMAGE."""
        return self.image.path

    @property
    def pinned(self) -> str:
        """`HOST/PROJECT/REPOSITORY/IMAGE@sha256:HEX`: the image by its digest."""
        return f"{self.host}/{self.repository}@{self.digest}"

    @property
    def pull(self) -> dict[str, str]:
        """What every worker pulls and runs (agent/container.py): the pinned name, its
        registry's host and, when the image's Env sets one, its PYTHONPATH (the last
        value), which the worker puts after tpuctl's own site folder."""
        found = {"name": self.pinned, "registry": self.host}
        paths = [e.split("=", 1)[1] for e in self.env if e.startswith("PYTHONPATH=")]
        if paths and paths[-1]:
            found["pythonpath"] = paths[-1]
        return found


def parse_image(text: str, what: str = "--image") -> ImageRef:
    """The image `text` names; a UsageError naming it and what is allowed for anything
    else (an image of another registry included)."""
    value = text.strip()
    found = _REFERENCE.fullmatch(value)
    if found is None:
        raise UsageError(f"invalid {what} {_shown(text)}: {_why(value)}; use {FORM}")
    parts = found.groupdict()
    if not parts["tag"] and not parts["digest"]:
        parts["tag"] = "latest"
    return ImageRef(**parts)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 200 else text[:197] + "...")


def _why(value: str) -> str:
    first = value.split("/", 1)[0]
    is_host = "." in first or ":" in first or first == "localhost"
    if not value or "/" not in value or not is_host:
        return "tpuctl pulls images from Artifact Registry only (as the TPU VM's service account)"
    if not first.endswith("-docker.pkg.dev"):
        return (
            f"{first} is not Artifact Registry: tpuctl pulls images from Artifact Registry "
            "only (as the TPU VM's service account)"
        )
    if "@" in value and not _DIGEST.fullmatch(value.rsplit("@", 1)[1]):
        return "a digest is sha256: and 64 lower-case hex digits"
    return "not an Artifact Registry image name"


@dataclass(frozen=True)
class PullAccess:
    """Whether an account may pull from an image's repository: the Policy Troubleshooter's
    verdict (GRANTED, NOT_GRANTED, or UNKNOWN_* when it cannot tell), and one line."""

    verdict: str
    message: str
    hint: str = ""

    @property
    def granted(self) -> bool | None:
        """True, False, or None when it cannot be told."""
        return {"GRANTED": True, "NOT_GRANTED": False}.get(self.verdict)


def pull_access(iam: IamApi, image: ImageRef, account: str) -> PullAccess:
    """May `account` (the VM's service account) pull `image`? Asked of the Policy
    Troubleshooter for the repository, as `tpuctl init` asks what the account holds on the
    project: it weighs every policy that counts (the repository's, the project's, a
    folder's or the organisation's) and custom roles, which reading two policies would not."""
    resource = f"//artifactregistry.googleapis.com/{image.repository_resource}"
    verdict = iam.troubleshoot(account, resource, PULL_PERMISSION, image.project)
    repo = image.repository_resource
    if verdict == "GRANTED":
        return PullAccess(verdict, f"{account} may pull from {repo} ({PULL_PERMISSION})")
    grant = (
        f"grant it {READER_ROLE} ({ROLES_DOC}): gcloud artifacts repositories "
        f"add-iam-policy-binding {image.repository} --location={image.location} "
        f"--project={image.project} --member=serviceAccount:{account} --role={READER_ROLE}"
    )
    if verdict == "NOT_GRANTED":
        message = f"{account} cannot pull {image}: it lacks {PULL_PERMISSION} on {repo}"
        return PullAccess(verdict, message, grant)
    message = (
        f"cannot tell whether {account} may pull {image} ({verdict}): you may not read "
        f"the policies of {repo}"
    )
    return PullAccess(verdict, message, f"if pulls are refused, {grant}")
