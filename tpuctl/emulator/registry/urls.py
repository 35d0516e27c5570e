"""Artifact Registry's REST routes (artifactregistry.googleapis.com v1): repositories and
their operations (`repositories.py`); the access gate knows the verbs (iam/access.py)."""

from __future__ import annotations

from tpuctl.emulator.core.routes import OnState, Route
from tpuctl.emulator.registry import repositories

_PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_ARGS = ("project", "location")

ROUTES: list[Route] = [
    (
        "POST",
        _PARENT + r"/repositories",
        "repositories.create",
        OnState(repositories.create),
        (*_ARGS, "?repositoryId", "body"),
    ),
    (
        "GET",
        _PARENT + r"/repositories",
        "repositories.list",
        OnState(repositories.list_repositories),
        (*_ARGS, "paging"),
    ),
    (
        "GET",
        _PARENT + r"/repositories/(?P<repo>[^/]+)",
        "repositories.get",
        OnState(repositories.get),
        (*_ARGS, "repo"),
    ),
    (
        "GET",
        _PARENT + r"/operations/(?P<op>[^/]+)",
        "artifactregistry.operations.get",
        OnState(repositories.get_operation),
        (*_ARGS, "op"),
    ),
]
