"""Artifact Registry's repositories (REST v1) and the images pushed into them: the
registry's part of the state (`state.registry`), which the state file keeps.

REST subset, as https://cloud.google.com/artifact-registry/docs/reference/rest/v1/projects.locations.repositories
documents it: `create` (`POST .../repositories?repositoryId=R`, a `Repository` body;
the answer is an `Operation` whose response is the created Repository; the emulator's
is done at once), `get`, `list`, and `operations.get`. Only DOCKER repositories.

The images: for each `HOST/PROJECT/REPO/IMAGE` (HOST: `LOCATION-docker.pkg.dev`), its
tags (tag -> digest), manifests (digest -> media type) and the blobs pushed to it; the
bytes themselves are files (`blobs.py`).
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.timestamps import rfc3339

_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
_LOCATION = re.compile(r"[a-z]+(-[a-z]+[0-9]+)?")
_TYPES = "type.googleapis.com/google.devtools.artifactregistry.v1."
MAX_IMAGES = 10_000  # a bound on what a test can make


def host(location: str) -> str:
    """The Docker registry's host of a location: `us` -> `us-docker.pkg.dev`."""
    return f"{location}-docker.pkg.dev"


class Registry:
    """Repositories by full name, operations by name, and images by full name."""

    def __init__(self) -> None:
        self.repositories: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        # "us-docker.pkg.dev/P/R/I" -> {"tags": {tag: digest}, "manifests": {digest:
        # media type}, "blobs": [digest, ...]}
        self.images: dict[str, dict[str, Any]] = {}

    def to_state(self) -> dict[str, Any]:
        return {"repositories": self.repositories, "images": self.images}

    def load(self, saved: Any) -> None:
        if isinstance(saved, dict):
            self.repositories.update(saved.get("repositories") or {})
            self.images.update(saved.get("images") or {})

    def repository(self, project: str, location: str, repo: str) -> dict[str, Any] | None:
        return self.repositories.get(f"projects/{project}/locations/{location}/repositories/{repo}")

    def image(self, name: str, make: bool = False) -> dict[str, Any] | None:
        found = self.images.get(name)
        if found is None and make:
            if len(self.images) >= MAX_IMAGES:
                raise errors.failed_precondition(f"the emulator keeps at most {MAX_IMAGES} images")
            found = self.images[name] = {"tags": {}, "manifests": {}, "blobs": []}
        return found


def _check_parent(project: str, location: str) -> None:
    if not _LOCATION.fullmatch(location):
        raise errors.invalid_argument(f"Invalid location: {location}", "parent")


def create(state: Any, project: str, location: str, repo_id: str, body: dict) -> dict:
    _check_parent(project, location)
    if not repo_id:
        raise errors.invalid_argument("repositoryId is required", "repository_id")
    if not _ID.fullmatch(repo_id):
        raise errors.invalid_argument(
            "repositoryId must start with a lowercase letter, hold lowercase letters, "
            "digits and hyphens, end with a letter or digit and be at most 63 characters",
            "repository_id",
        )
    if body.get("format") != "DOCKER":
        raise errors.invalid_argument(
            "format must be DOCKER (the emulator serves Docker repositories only)", "format"
        )
    name = f"projects/{project}/locations/{location}/repositories/{repo_id}"
    registry: Registry = state.registry
    if name in registry.repositories:
        raise errors.already_exists(name)
    now = rfc3339(state.now())
    repository = {
        "name": name,
        "format": "DOCKER",
        "description": str(body.get("description", "")),
        "labels": dict(body.get("labels") or {}),
        "mode": "STANDARD_REPOSITORY",
        "createTime": now,
        "updateTime": now,
        "registryUri": f"{host(location)}/{project}/{repo_id}",
    }
    if not repository["description"]:
        del repository["description"]
    registry.repositories[name] = repository
    op_name = f"projects/{project}/locations/{location}/operations/{uuid.uuid4()}"
    operation = {
        "name": op_name,
        "metadata": {"@type": _TYPES + "OperationMetadata"},
        "done": True,
        "response": {"@type": _TYPES + "Repository", **copy.deepcopy(repository)},
    }
    registry.operations[op_name] = operation
    state.changed()
    return copy.deepcopy(operation)


def get(state: Any, project: str, location: str, repo: str) -> dict:
    found = state.registry.repository(project, location, repo)
    if found is None:
        raise errors.not_found(f"projects/{project}/locations/{location}/repositories/{repo}")
    return copy.deepcopy(found)


def list_repositories(
    state: Any, project: str, location: str, page_size: int, page_token: str
) -> dict:
    _check_parent(project, location)
    prefix = f"projects/{project}/locations/{location}/repositories/"
    names = sorted(n for n in state.registry.repositories if n.startswith(prefix))
    names = [n for n in names if n > page_token] if page_token else names
    size = page_size if 0 < page_size <= 1000 else 1000
    answer: dict[str, Any] = {
        "repositories": [copy.deepcopy(state.registry.repositories[n]) for n in names[:size]]
    }
    if len(names) > size:
        answer["nextPageToken"] = names[size - 1]
    return answer


def get_operation(state: Any, project: str, location: str, op: str) -> dict:
    name = f"projects/{project}/locations/{location}/operations/{op}"
    found = state.registry.operations.get(name)
    if found is None:
        raise errors.not_found(name)
    return copy.deepcopy(found)


def images(state: Any) -> dict[str, Any]:
    """What the control plane lists: every image's name, tags and manifests."""
    listed = [
        {
            "name": name,
            "tags": dict(sorted(image["tags"].items())),
            "manifests": dict(sorted(image["manifests"].items())),
        }
        for name, image in sorted(state.registry.images.items())
    ]
    return {"images": listed}
