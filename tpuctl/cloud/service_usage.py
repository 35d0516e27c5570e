"""ServiceUsageApi: the adapter over the Service Usage API (serviceusage.googleapis.com):
which APIs a project has enabled, and enabling one.

Every call goes through `retry.call` with the shared translation (a disabled API,
billing off and a missing permission read as everywhere else). An enable is a
long-running operation: `enable` starts it and returns its name; the caller waits
with `operation_done` through `tpuctl/waiting.py`. Google's libraries are imported
inside the calls, so services may import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tpuctl.errors import CloudError

T = TypeVar("T")
TIMEOUT = 30.0


class ServiceUsageApi:
    """The APIs of a project, as Service Usage reports and switches them."""

    def __init__(
        self, client: Any, where: str = "the Service Usage API", unreachable_hint: str = ""
    ) -> None:
        self._client = client
        self._where = where
        self._hint = unreachable_hint

    def _call(self, subject: str, project: str, fn: Callable[[], T]) -> T:
        from tpuctl.cloud.errors import translate
        from tpuctl.cloud.retry import call

        return call(fn, lambda e: translate(e, subject, self._where, self._hint, project))

    def enabled(self, project: str, service: str) -> bool:
        """Whether `service` (e.g. tpu.googleapis.com) is enabled in the project."""
        from google.cloud import service_usage_v1

        name = f"projects/{project}/services/{service}"
        got = self._call(
            f"the API {service}",
            project,
            lambda: self._client.get_service(request={"name": name}, timeout=TIMEOUT),
        )
        return bool(got.state == service_usage_v1.State.ENABLED)

    def enable(self, project: str, services: list[str]) -> str | None:
        """Start enabling `services` (at most 20), as `gcloud services enable` does: one
        `services.enable` for one, one `services.batchEnable` for several; the
        operation's name, or None when it is done already."""
        if len(services) == 1:
            name = f"projects/{project}/services/{services[0]}"
            request: dict[str, Any] = {"name": name}
            send = self._client.enable_service
        else:
            request = {"parent": f"projects/{project}", "service_ids": list(services)}
            send = self._client.batch_enable_services
        op = self._call(
            f"enabling {', '.join(services)}",
            project,
            lambda: send(request=request, timeout=TIMEOUT),
        )
        return None if op.done() else str(op.operation.name)

    def operation_done(self, project: str, name: str) -> bool:
        """Whether the operation `name` is done; its error, if it failed, is raised."""
        op = self._call(
            f"operation {name}",
            project,
            lambda: self._client.get_operation(request={"name": name}, timeout=TIMEOUT),
        )
        if not op.done:
            return False
        if op.HasField("error") and op.error.code:
            raise CloudError(f"operation {name} failed: {op.error.message}")
        return True
