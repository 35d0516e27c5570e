"""URL routing: every service's REST paths (`<service>/urls.py`, what a route is:
`routes.py`), matched in order; the control plane's are `control/urls.py`'s.

A route names the backend method or front method, not the bound method: the caller
(`api_call`) looks it up on its own backend, and no table needs a backend to be imported.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from tpuctl.emulator.compute import urls as compute_urls
from tpuctl.emulator.core import errors
from tpuctl.emulator.core.routes import Route, Target
from tpuctl.emulator.iam import urls as iam_urls
from tpuctl.emulator.monitoring import urls as monitoring_urls
from tpuctl.emulator.quotas import urls as quotas_urls
from tpuctl.emulator.tpu import urls as tpu_urls

API_ROUTES: list[Route] = [
    *tpu_urls.ROUTES,
    *quotas_urls.ROUTES,
    *iam_urls.ROUTES,
    *monitoring_urls.ROUTES,
    *compute_urls.ROUTES,
]

_COMPILED = [(m, re.compile(path + "$"), verb, fn, spec) for m, path, verb, fn, spec in API_ROUTES]


def route(method: str, path: str) -> tuple[str, Target, tuple[str, ...], dict[str, str]]:
    for route_method, pattern, verb, fn, spec in _COMPILED:
        match = pattern.match(path)
        if match and route_method == method:
            return verb, fn, spec, {k: unquote(v) for k, v in match.groupdict().items()}
    raise errors.no_route(method, path)
