"""URL routing: every service's REST paths (the routes of the backend's services, in
their order: `BackendCore.routes`; what a route is: `routes.py`); the control plane's
are `control/urls.py`'s.

A route names the backend method or front method, not the bound method: the caller
(`api_call`) looks it up on its own backend, and no table needs a backend to be imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.routes import Route, Target
from tpuctl.emulator.core.service import Service


def api_routes(services: Iterable[Service]) -> list[Route]:
    """The services' routes, in the order a request's path is matched against them."""
    return [route for service in services for route in service.routes]


class Routes:
    """The services' routes, compiled once (the backend holds them)."""

    def __init__(self, services: Iterable[Service]) -> None:
        self._compiled = [
            (m, re.compile(path + "$"), verb, fn, spec)
            for m, path, verb, fn, spec in api_routes(services)
        ]

    def route(self, method: str, path: str) -> tuple[str, Target, tuple[str, ...], dict[str, str]]:
        for route_method, pattern, verb, fn, spec in self._compiled:
            match = pattern.match(path)
            if match and route_method == method:
                return verb, fn, spec, {k: unquote(v) for k, v in match.groupdict().items()}
        raise errors.no_route(method, path)
