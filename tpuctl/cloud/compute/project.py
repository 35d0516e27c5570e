"""ProjectMetadataApi: Compute Engine's `projects.get`, for the project's metadata
(`commonInstanceMetadata`), where `enable-oslogin` may be set for every VM.

A plain REST GET through the credentials' session (cloud/session.py) rather than
google-cloud-compute, a large library for one read. Errors go through the shared
translation (`cloud/errors.py`), as google-api-core builds them from the HTTP answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ProjectMetadataApi:
    """Reads a project's Compute Engine metadata."""

    def __init__(
        self,
        session: Callable[[], Any],
        endpoint: str,
        where: str = "the Compute Engine API",
        unreachable_hint: str = "",
    ) -> None:
        self._session = session  # made on first use (cloud/session.py)
        self._endpoint = endpoint.rstrip("/")  # .../compute/v1
        self._where = where
        self._hint = unreachable_hint

    def project_metadata(self, project: str) -> dict[str, str]:
        """The project's metadata items (`commonInstanceMetadata`), key -> value."""
        from tpuctl.cloud import rest

        body = rest.call(
            self._session,
            "GET",
            f"{self._endpoint}/projects/{project}",
            params={"fields": "commonInstanceMetadata"},
            subject=f"the metadata of project {project}",
            where=self._where,
            hint=self._hint,
            project=project,
        )
        items = (body.get("commonInstanceMetadata") or {}).get("items") or []
        return {str(i.get("key")): str(i.get("value") or "") for i in items if i.get("key")}
