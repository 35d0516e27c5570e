"""URL routing: every service's REST paths (the routes of `emulator/services.py`'s
services, in their order; what a route is: `routes.py`); the control plane's are
`control/urls.py`'s.

A route names the backend method or front method, not the bound method: the caller
(`api_call`) looks it up on its own backend, and no table needs a backend to be imported.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.routes import Route, Target
from tpuctl.emulator.services import SERVICES

API_ROUTES: list[Route] = [route for service in SERVICES for route in service.routes]

_COMPILED = [(m, re.compile(path + "$"), verb, fn, spec) for m, path, verb, fn, spec in API_ROUTES]


def route(method: str, path: str) -> tuple[str, Target, tuple[str, ...], dict[str, str]]:
    for route_method, pattern, verb, fn, spec in _COMPILED:
        match = pattern.match(path)
        if match and route_method == method:
            return verb, fn, spec, {k: unquote(v) for k, v in match.groupdict().items()}
    raise errors.no_route(method, path)
