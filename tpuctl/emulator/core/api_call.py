"""One API call through the emulator's front end, whatever the wire: route the REST
method and path (`urls`), count it, keep its body, draw an injected fault, pass the
access gate (`iam/access.py`), run the backend method. The HTTP server (`server.py`) and
the gRPC front (`tpu/grpc_front.py`, which transcodes each RPC into its REST form as Google's
front end does) both call `call`, so both behave alike, error for error.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.routes import OnFront, OnState, arguments


def call(
    backend: BackendCore,
    method: str,
    path: str,
    query: dict[str, str],
    body: dict[str, Any],
    target: str,
    authorization: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The answer of `method path` (`target`: the path and query as sent, which fault
    rules match; `authorization`: the request's header, whose token may be a VM's, see
    `iam/accounts.py`; `headers`: the request's, by lower-case name); raises
    `errors.ApiError` as the cloud would answer."""
    verb, fn, spec, match = backend.routes.route(method, path)
    backend.requests.count(f"{method} {verb}")
    backend.requests.record(verb, method, path, query, body)
    delay, fault, after, quota = backend.draw_fault(target)
    if delay:
        time.sleep(delay)
    if fault is not None and not after:
        raise errors.injected(fault, match.get("project", ""), match.get("zone"), quota)
    principal = backend.principal(authorization)
    backend.admit(verb, match.get("project", ""), path, principal, method != "GET")
    run: Callable[..., Any]
    if isinstance(fn, OnFront):
        run = getattr(fn.front(backend), fn.method)
    elif isinstance(fn, OnState):
        run = functools.partial(backend.apply, fn.fn)
    else:
        run = attrgetter(fn)(backend) if isinstance(fn, str) else fn
    result = run(*arguments(spec, match, query, body, principal, headers))
    if fault is not None:
        raise errors.injected(fault, match.get("project", ""), match.get("zone"), quota)
    return result
