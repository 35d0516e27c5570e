"""The Cloud TPU API's plumbing under `TpuApi`: google-cloud-tpu's client (made on first
use), `_call`, the one seam that retries transient faults and translates Google's
exceptions into tpuctl's errors, REST through the credentials' session (the lists, page by
page, and the v2alpha1 fields google-cloud-tpu's messages lack), and operations read back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tpuctl.cloud.retry import call
from tpuctl.errors import CloudError
from tpuctl.waiting import poll_until

if TYPE_CHECKING:
    from google.cloud import tpu_v2

T = TypeVar("T")
TIMEOUT = 60.0  # per HTTP call; a hung call becomes a retry


def to_dict(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    return json_format.MessageToDict(type(message).pb(message))


def project_of(name: str) -> str:
    """`projects/p/...` -> p."""
    parts = name.split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "projects" else ""


def subject_of(name: str) -> str:
    """`projects/p/locations/z/nodes/n` -> "node 'n' in zone z"."""
    parts = name.split("/")
    if len(parts) >= 6 and parts[4] == "nodes":
        return f"node '{parts[5]}' in zone {parts[3]}"
    if len(parts) >= 6 and parts[4] == "queuedResources":
        return f"queued resource '{parts[5]}' in zone {parts[3]}"
    return name


class TpuTransport:
    """The client, the session and the seam every call of the TPU API goes through."""

    def __init__(
        self,
        client: tpu_v2.TpuClient | Callable[[], tpu_v2.TpuClient],
        where: str = "the TPU API",
        unreachable_hint: str = "",
        session: Callable[[], Any] | None = None,
        endpoint: str = "https://tpu.googleapis.com",
    ) -> None:
        # google-cloud-tpu's client (or what makes it, on first use: importing it costs
        # ~0.3 s, which the lists, read over REST when a session is given, never pay)
        self._made: tpu_v2.TpuClient | None = None if callable(client) else client
        self._make = client if callable(client) else None
        self._where = where
        self._hint = unreachable_hint
        # REST through the credentials' session: the lists, and v2alpha1 for the fields
        # google-cloud-tpu's messages lack (flex-start)
        self._session = session
        self._endpoint = endpoint.rstrip("/")

    @property
    def _client(self) -> tpu_v2.TpuClient:
        if self._made is None:
            assert self._make is not None
            self._made = self._make()
        return self._made

    def _call(self, subject: str, fn: Callable[[], T]) -> T:
        def translated(e: BaseException) -> BaseException:
            from tpuctl.cloud.errors import translate  # on a failure only: it loads grpc

            return translate(e, subject, self._where, self._hint)

        return call(fn, translated)

    def _rest(self, method: str, path: str, subject: str, **kw: Any) -> dict[str, Any]:
        """`method /{path}` over REST (`path` from the version on: `v2/projects/...`)."""
        from tpuctl.cloud import rest

        assert self._session is not None
        kw.update(where=self._where, hint=self._hint, project=project_of(path.split("/", 1)[1]))
        url = f"{self._endpoint}/{path}"
        return dict(rest.call(self._session, method, url, subject=subject, **kw))

    def _rest_list(self, parent: str, collection: str, subject: str) -> list[dict[str, Any]]:
        """Every item of `GET /v2/{parent}/{collection}` (camelCase JSON, as the client's
        messages become with MessageToDict), page by page."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"pageToken": token} if token else None
            page = self._rest("GET", f"v2/{parent}/{collection}", subject, params=params)
            items += page.get(collection) or []
            token = str(page.get("nextPageToken") or "")
            if not token:
                return items

    def _create_alpha(self, parent: str, qr_id: str, body: dict[str, Any]) -> str:
        """`queuedResources.create` in v2alpha1 over REST, as gcloud alpha sends it: the
        flex-start fields exist only there, and google-cloud-tpu's v2alpha1 messages
        (gRPC only) do not have them. Its operation is read back through v2 as any
        other: operations are one store for both versions."""
        from tpuctl.cloud import rest

        if self._session is None:
            raise CloudError("flex-start needs the TPU API's REST endpoint; none was given")
        url = f"{self._endpoint}/v2alpha1/{parent}/queuedResources"
        answer = rest.send(
            self._session,
            "POST",
            url,
            params={"queuedResourceId": qr_id},
            json=body,
            timeout=TIMEOUT,
        )
        return str(answer.get("name", ""))

    def _get_operation(self, name: str) -> dict[str, Any]:
        """The operation as JSON ({name, done, error?, ...}); over REST when a session is
        given (its response, a Node, may hold fields google-cloud-tpu's v2 Node lacks, such
        as `upcomingMaintenance`, which its REST transport refuses to parse)."""
        if self._session is not None:
            return self._rest("GET", f"v2/{name}", f"operation {name}")
        from google.protobuf import json_format

        op = self._call(
            f"operation {name}",
            lambda: self._client.get_operation(request={"name": name}, timeout=TIMEOUT),
        )
        return json_format.MessageToDict(op)

    def _wait_operation(self, operation: str, subject: str, timeout: float = 300.0) -> None:
        def check() -> tuple[bool | None, str]:
            op = self._get_operation(operation)
            if not op.get("done"):
                return None, "RUNNING"
            if op.get("error"):
                raise CloudError(f"{subject}: {op['error'].get('message', 'update failed')}")
            return True, "DONE"

        poll_until(
            check,
            what=f"the update of {subject}",
            timeout=timeout,
            timed_out=lambda state, elapsed: CloudError(
                f"{subject}: the update did not finish in {timeout:.0f} s"
            ),
        )
