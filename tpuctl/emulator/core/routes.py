"""What a route is: each service's URL table (`<service>/urls.py`) is a list of them,
and `core/urls.py` joins the tables and matches a request against them.

A route is (HTTP method, path regex, verb counted in /requests, handler, arguments).
The handler is one of:
- `OnFront(front, method)`: a method of the service's front over the backend,
  `front(backend).method(*args)`, which calls the backend and renders its answer;
- `OnState(fn)`: an API function over the state, `fn(state, *args)`, that answers JSON,
  run under the backend's lock (`Backend.apply`);
- the name of a backend method that answers JSON (`a.b`: a method of the backend's `a`);
- a plain function that needs no state (the catalogue).
The arguments name path groups, "?param" (a query parameter), "paging" (pageSize and
pageToken), "query" (every parameter), "body", "principal" (who calls) and
"user_project" (the `x-goog-user-project` header: the quota project a client names) and
"api_key" (an API key, `?key=` or the `x-goog-api-key` header; "" for none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tpuctl.emulator.core import errors

Handler = Callable[..., Any]


@dataclass(frozen=True)
class OnState:
    """A route to an API function over the state, `fn(state, *args)`, which the backend
    runs under its lock (`Backend.apply`): no facade method needed for each."""

    fn: Handler


@dataclass(frozen=True)
class OnFront:
    """A route to a method of a service's front (`front(backend).method`): it calls the
    backend, which answers model objects, and renders them as the wire JSON."""

    front: Callable[[Any], Any]
    method: str


Target = str | Handler | OnState | OnFront
Route = tuple[str, str, str, Target, tuple[str, ...]]


def arguments(
    spec: tuple[str, ...],
    match: dict[str, str],
    query: dict[str, str],
    body: dict[str, Any],
    principal: Any = None,
    headers: Mapping[str, str] | None = None,
) -> list[Any]:
    args: list[Any] = []
    for item in spec:
        if item == "principal":  # who calls: a VM's service account (iam/accounts.py), or None
            args.append(principal)
        elif item == "user_project":
            args.append((headers or {}).get("x-goog-user-project", ""))
        elif item == "api_key":
            args.append(query.get("key") or (headers or {}).get("x-goog-api-key", ""))
        elif item == "body":
            args.append(body)
        elif item == "query":  # every query parameter, as sent
            args.append(dict(query))
        elif item == "paging":
            try:
                args.append(int(query.get("pageSize") or 0))
            except ValueError:
                raise errors.invalid_argument("pageSize must be a number.", "page_size") from None
            args.append(query.get("pageToken", ""))
        elif item.startswith("?"):
            args.append(query.get(item[1:], ""))
        else:
            args.append(match[item])
    return args
