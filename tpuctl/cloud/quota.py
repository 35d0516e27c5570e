"""QuotaApi: the adapter over the Cloud Quotas API (cloudquotas.googleapis.com), read-only.

tpuctl reads the limits of the TPU quotas (service tpu.googleapis.com) with it; usage
comes from the project's nodes. Every call goes through `_call`, which retries
transient faults and turns "API not enabled" and "permission denied" into errors
that say what to enable or grant. Limits cross this boundary as `QuotaInfo`.
Google's libraries are imported inside the calls, so services may import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tpuctl.catalog import QUOTA_SERVICE
from tpuctl.errors import ConfigError, TpuctlError

T = TypeVar("T")
TIMEOUT = 30.0
QUOTAS_API = "cloudquotas.googleapis.com"


@dataclass(frozen=True)
class QuotaInfo:
    """The limits of one quota: explicit per region or zone, and a default elsewhere."""

    quota_id: str
    metric: str = ""
    dimensions: tuple[str, ...] = ()
    limits: dict[str, int] = field(default_factory=dict)
    default: int | None = None
    default_locations: frozenset[str] = frozenset()

    def limit(self, location: str) -> int | None:
        """The limit in a region or zone (None: the quota says nothing about it)."""
        if location in self.limits:
            return self.limits[location]
        if self.default is None:
            return None
        if not self.default_locations or location in self.default_locations:
            return self.default
        return None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> QuotaInfo:
        """From the API's JSON form. Entries are ordered most specific first; the one
        without dimensions is the default. A missing value is a zero (proto3 JSON)."""
        limits: dict[str, int] = {}
        default, default_locations = None, frozenset[str]()
        for entry in data.get("dimensionsInfos") or []:
            value = int((entry.get("details") or {}).get("value") or 0)
            dims = entry.get("dimensions") or {}
            where = dims.get("zone") or dims.get("region")
            if where:
                limits.setdefault(where, value)
            elif not dims and default is None:
                default = value
                default_locations = frozenset(entry.get("applicableLocations") or ())
                default_locations -= {"global"}
        return cls(
            quota_id=data.get("quotaId", ""),
            metric=data.get("metric", ""),
            dimensions=tuple(data.get("dimensions") or ()),
            limits=limits,
            default=default,
            default_locations=default_locations,
        )


@dataclass(frozen=True)
class QuotaRequest:
    """A quota preference: what the project asked a quota to be, and what it got so far."""

    name: str
    quota_id: str
    location: str  # the region or zone it is for ("" for every location)
    preferred: int
    granted: int | None
    pending: bool  # still under review (`reconciling`)
    detail: str = ""
    email: str = ""

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> QuotaRequest:
        config = data.get("quotaConfig") or {}
        dims = data.get("dimensions") or {}
        granted = config.get("grantedValue")
        return cls(
            name=data.get("name", ""),
            quota_id=data.get("quotaId", ""),
            location=dims.get("zone") or dims.get("region") or "",
            preferred=int(config.get("preferredValue") or 0),
            granted=None if granted is None else int(granted),
            pending=bool(data.get("reconciling")),
            detail=config.get("stateDetail", ""),
            email=data.get("contactEmail", ""),
        )

    @property
    def state(self) -> str:
        if self.pending:
            return "pending"
        return "granted" if (self.granted or 0) >= self.preferred else "partly granted"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "quotaId": self.quota_id,
            "location": self.location,
            "preferredValue": self.preferred,
            "grantedValue": self.granted,
            "state": self.state,
            "detail": self.detail,
        }


def translate(exc: BaseException, project: str, where: str, hint: str) -> TpuctlError:
    """Google's exception -> tpuctl's, naming the API to enable or the permission to grant."""
    from google.api_core import exceptions as gx

    from tpuctl.cloud.errors import refused, server_message
    from tpuctl.cloud.errors import translate as tpu_translate

    msg = server_message(exc)
    if isinstance(exc, gx.Forbidden):
        if "quota project" in msg:  # user credentials without a quota project
            return ConfigError(
                f"the Cloud Quotas API needs a quota project for your credentials: {msg}",
                hint=f"run `gcloud auth application-default set-quota-project {project}`",
            )
        return refused(
            exc,
            project=project,
            what="quotas",
            needs="the permission cloudquotas.quotas.get, e.g. through the role "
            "roles/cloudquotas.viewer",
        )
    return tpu_translate(exc, f"TPU quotas of project {project}", where, hint)


def _to_dict(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    return dict(json_format.MessageToDict(type(message).pb(message)))


class QuotaApi:
    """The TPU quotas of a project, as the Cloud Quotas API reports them."""

    def __init__(
        self, client: Any, where: str = "the Cloud Quotas API", unreachable_hint: str = ""
    ):
        self._client = client
        self._where = where
        self._hint = unreachable_hint

    def _call(self, project: str, fn: Callable[[], T], patience: float | None = None) -> T:
        from tpuctl.cloud.retry import MAX_SECONDS, call

        return call(
            fn, lambda e: translate(e, project, self._where, self._hint), patience or MAX_SECONDS
        )

    @staticmethod
    def _parent(project: str) -> str:
        return f"projects/{project}/locations/global/services/{QUOTA_SERVICE}"

    def quota_infos(self, project: str) -> dict[str, QuotaInfo]:
        """Every TPU quota of the project, by quota id (one paged listing)."""

        def fetch() -> dict[str, QuotaInfo]:
            pager = self._client.list_quota_infos(
                request={"parent": self._parent(project)}, timeout=TIMEOUT
            )
            infos = (QuotaInfo.from_api(_to_dict(info)) for info in pager)
            return {info.quota_id: info for info in infos}

        return self._call(project, fetch)

    def regional_limits(
        self, project: str, service: str, ids: set[str], dimension: str
    ) -> dict[tuple[str, str, str], int]:
        """The regional limits of the quotas `ids` that `service` lists (a pool apart from
        the catalogue's, such as Compute Engine's TPU quotas, whose ids its adapter owns):
        (quota id, the value of `dimension` or "", region) -> the limit."""

        def fetch() -> dict[tuple[str, str, str], int]:
            parent = f"projects/{project}/locations/global/services/{service}"
            pager = self._client.list_quota_infos(request={"parent": parent}, timeout=TIMEOUT)
            out: dict[tuple[str, str, str], int] = {}
            for info in (_to_dict(i) for i in pager):
                if info.get("quotaId") not in ids:
                    continue
                for entry in info.get("dimensionsInfos") or []:
                    dims = entry.get("dimensions") or {}
                    if dims.get("region"):
                        key = (info["quotaId"], dims.get(dimension, ""), dims["region"])
                        out.setdefault(key, int((entry.get("details") or {}).get("value") or 0))
            return out

        return self._call(project, fetch)

    def requests(self, project: str) -> list[QuotaRequest]:
        """The project's quota preferences for TPU quotas (increase requests and their state)."""

        def fetch() -> list[QuotaRequest]:
            pager = self._client.list_quota_preferences(
                request={"parent": f"projects/{project}/locations/global"}, timeout=TIMEOUT
            )
            prefs = (_to_dict(p) for p in pager)
            return [QuotaRequest.from_api(p) for p in prefs if p.get("service") == QUOTA_SERVICE]

        return self._call(project, fetch)

    def request_increase(
        self,
        project: str,
        quota_id: str,
        value: int,
        dimension: str,
        location: str,
        justification: str = "",
        email: str = "",
    ) -> QuotaRequest:
        """File a quota preference: `quota_id` at `value` in a region or zone."""
        body = {
            "service": QUOTA_SERVICE,
            "quota_id": quota_id,
            "quota_config": {"preferred_value": value},
            "dimensions": {dimension: location},
            "justification": justification,
            "contact_email": email,
        }
        made = self._call(
            project,
            lambda: self._client.create_quota_preference(
                request={
                    "parent": f"projects/{project}/locations/global",
                    "quota_preference": body,
                },
                timeout=TIMEOUT,
            ),
        )
        return QuotaRequest.from_api(_to_dict(made))

    def quota_info(self, project: str, quota_id: str, patience: float | None = None) -> QuotaInfo:
        """One quota; `patience` bounds the seconds spent retrying transient faults."""
        name = f"{self._parent(project)}/quotaInfos/{quota_id}"
        timeout = min(TIMEOUT, patience) if patience else TIMEOUT
        info = self._call(
            project,
            lambda: self._client.get_quota_info(name=name, timeout=timeout),
            patience,
        )
        return QuotaInfo.from_api(_to_dict(info))
