"""The query side of the emulated `projects.timeSeries.list`: its REST parameters parsed
and checked as Cloud Monitoring does (400 INVALID_ARGUMENT naming the field), alignment,
paging, and the JSON of a point. models.py holds the samples and answers with this."""

from __future__ import annotations

import base64
import calendar
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tpuctl.emulator.core import errors

RESOURCE = "tpu_worker"
PREFIX = "tpu.googleapis.com/"
IDLE = PREFIX + "tpu/tensorcore/idle_duration"
DUTY = PREFIX + "accelerator/duty_cycle"
TENSORCORE = PREFIX + "accelerator/tensorcore_utilization"
MXU = PREFIX + "tpu/mxu/utilization"
CPU = PREFIX + "cpu/utilization"
MEMORY = PREFIX + "memory/usage"
# metric type -> (kind, value type, unit, per chip: the metric label naming the chip)
METRICS: dict[str, tuple[str, str, str, str | None]] = {
    IDLE: ("GAUGE", "INT64", "s", "accelerator_id"),
    DUTY: ("GAUGE", "DOUBLE", "%", "accelerator_id"),
    TENSORCORE: ("GAUGE", "DOUBLE", "%", "accelerator_id"),
    MXU: ("GAUGE", "DOUBLE", "%", None),
    CPU: ("GAUGE", "DOUBLE", "%", None),
    MEMORY: ("GAUGE", "INT64", "By", None),
}
ALIGNERS = ("ALIGN_NONE", "ALIGN_MEAN", "ALIGN_MAX", "ALIGN_MIN")
MAX_PAGE = 100_000


@dataclass
class _Request:
    start: float
    end: float
    aligner: str
    period: float
    headers: bool
    page_size: int
    offset: int

    def align(self, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        """One point per alignment period ending at `end`, `end - period`, ... (oldest first)."""
        if self.aligner == "ALIGN_NONE":
            return points
        buckets: dict[int, list[float]] = {}
        for t, v in points:
            k = int((self.end - t) // self.period) if t < self.end else 0
            buckets.setdefault(k, []).append(v)
        out = []
        for k in sorted(buckets, reverse=True):
            values = buckets[k]
            if self.aligner == "ALIGN_MEAN":
                value = sum(values) / len(values)
            else:
                value = max(values) if self.aligner == "ALIGN_MAX" else min(values)
            out.append((self.end - k * self.period, value))
        return out


def _bad(field_name: str, value: str, why: str) -> errors.ApiError:
    return errors.invalid_argument(
        f'Field {field_name} had an invalid value of "{value}": {why}', field_name
    )


def _parse_request(query: dict[str, str]) -> _Request:
    end_text = query.get("interval.endTime", "")
    if not end_text:
        raise _bad("interval.end_time", "", "The end time is required.")
    end = _parse_time("interval.end_time", end_text)
    start_text = query.get("interval.startTime", "")
    start = _parse_time("interval.start_time", start_text) if start_text else end
    if start > end:
        raise _bad("interval.start_time", start_text, "The start time must be before the end time.")
    aligner = query.get("aggregation.perSeriesAligner", "") or "ALIGN_NONE"
    if aligner not in ALIGNERS:
        raise _bad("aggregation.per_series_aligner", aligner, "The aligner is not supported.")
    period = 0.0
    if aligner != "ALIGN_NONE":
        text = query.get("aggregation.alignmentPeriod", "")
        m = re.fullmatch(r"(\d+(?:\.\d+)?)s", text)
        if not m:
            raise _bad(
                "aggregation.alignment_period", text,
                "An alignment period is required with a per-series aligner.",
            )  # fmt: skip
        period = float(m[1])
        if period < 60:
            raise _bad(
                "aggregation.alignment_period", text,
                "The alignment period must be at least 60 seconds.",
            )  # fmt: skip
    if query.get("aggregation.crossSeriesReducer", "REDUCE_NONE") != "REDUCE_NONE":
        raise _bad(
            "aggregation.cross_series_reducer",
            query["aggregation.crossSeriesReducer"],
            "The emulator serves no cross-series reduction.",
        )
    view = query.get("view", "") or "FULL"
    if view not in ("FULL", "HEADERS"):
        raise _bad("view", view, "Expected FULL or HEADERS.")
    try:
        page_size = int(query.get("pageSize") or 0)
    except ValueError:
        raise _bad("page_size", query["pageSize"], "Expected a number.") from None
    if page_size < 0:
        raise _bad("page_size", str(page_size), "The page size must be positive.")
    offset = 0
    token = query.get("pageToken", "")
    if token:
        try:
            offset = int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("ts:"))
        except ValueError:
            raise _bad("page_token", token, "The page token is not valid.") from None
    return _Request(
        start, end, aligner, period, view == "HEADERS",
        min(page_size or MAX_PAGE, MAX_PAGE), offset,
    )  # fmt: skip


def _parse_time(field_name: str, text: str) -> float:
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{1,9})?Z", text)
    if not m:
        raise _bad(field_name, text, "Expected an RFC 3339 timestamp in UTC ('Z').")
    try:
        base = calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        raise _bad(field_name, text, "Expected an RFC 3339 timestamp in UTC ('Z').") from None
    return base + (float(m[2]) if m[2] else 0.0)


_TERM = re.compile(
    r"\s*(?P<lhs>metric\.type|resource\.type|(?:metric|resource)\.labels?\.[a-z_][a-z0-9_]*)"
    r'\s*=\s*(?:"(?P<value>[^"\\]*)"|one_of\((?P<many>\s*"[^"\\]*"(?:\s*,\s*"[^"\\]*")*\s*)\))\s*'
)


def parse_filter(text: str) -> dict[str, list[str]]:
    """`lhs = "value" AND ...` (values may be `one_of("a", "b")`): the allowed values by
    field, with `resource.label.x` spelled `resource.labels.x`. Exactly one metric type."""
    if not text.strip():
        raise _bad("filter", text, "A filter is required: it must name one metric type.")
    terms: dict[str, list[str]] = {}
    for part in re.split(r"\s+AND\s+", text.strip()):
        m = _TERM.fullmatch(part)
        if not m:
            raise _bad("filter", text, f"Could not parse the filter near '{part.strip()}'.")
        lhs = re.sub(r"^(metric|resource)\.label\.", r"\1.labels.", m["lhs"])
        values = [m["value"]] if m["value"] is not None else re.findall(r'"([^"]*)"', m["many"])
        if lhs in terms:  # two conditions on one field: both must hold
            values = [v for v in values if v in terms[lhs]]
        terms[lhs] = values
    metric = terms.get("metric.type")
    if not metric or len(metric) != 1:
        raise _bad("filter", text, "The filter must specify a single metric type.")
    if metric[0] not in METRICS:
        raise _bad("filter", text, f"The metric type '{metric[0]}' is not known to the emulator.")
    return terms


def _page(series: list[dict[str, Any]], request: _Request, unit: str) -> dict[str, Any]:
    """A page: whole series, up to page_size points (FULL) or series (HEADERS)."""
    out: dict[str, Any] = {}
    page: list[dict[str, Any]] = []
    count = 0
    index = request.offset
    while index < len(series):
        item = series[index]
        size = 1 if request.headers else len(item["points"])
        if page and count + size > request.page_size:
            break
        if request.headers:
            item = {k: v for k, v in item.items() if k != "points"}
        page.append(item)
        count += size
        index += 1
    if page:
        out["timeSeries"] = page
        out["unit"] = unit
    if index < len(series):
        out["nextPageToken"] = base64.urlsafe_b64encode(f"ts:{index}".encode()).decode()
    return out


def _point(t: float, value: float, value_type: str) -> dict[str, Any]:
    at = _rfc3339(t)
    typed: dict[str, Any] = (
        {"int64Value": str(int(value))} if value_type == "INT64" else {"doubleValue": value}
    )
    return {"interval": {"startTime": at, "endTime": at}, "value": typed}


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- what the workers do -------------------------------------------------------------------
