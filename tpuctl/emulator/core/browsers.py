"""No web page drives the emulator: what a browser can send is refused.

The emulator listens on the laptop, where a browser also runs, and what it serves can
create VMs whose startup scripts run on the laptop. A web page may send a "simple"
cross-origin request without asking first (a POST whose body is `text/plain`, a form,
or multipart: https://fetch.spec.whatwg.org/#cors-safelisted-request-header), and a page
whose name it rebinds to 127.0.0.1 reaches it as its own origin (DNS rebinding). So,
before anything is done:

- a request with an `Origin` header is refused (403): browsers send one with every
  cross-origin request and every POST; Google's clients, gcloud, curl and tpuctl's agent
  never do;
- a request whose `Host` is a name that is not the emulator's own (`localhost`, the address
  it listens on, or an IP literal) is refused (403): a rebound name is the page's;
- a request that carries a body where JSON is expected, in any other type than JSON, is
  refused (415), so no simple request reaches the API at all. Not on Cloud Storage's
  proxy: an object's bytes come in the object's own type, `text/plain` included (a media
  upload), and Python's urllib labels a body it is given without one as a form's; there a
  page's request is refused by its Origin, which browsers send with every method but GET
  and HEAD (https://fetch.spec.whatwg.org/#origin-header), and every GET or HEAD there
  only reads.

These are the emulator's rules, not the cloud's: Google's endpoints are not on your
laptop. Standard library only.
"""

from __future__ import annotations

import ipaddress
from typing import Protocol


class Headers(Protocol):
    """A request's headers (http.server's `Message`, a dict)."""

    def get(self, name: str, default: None = None, /) -> str | None: ...


LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
JSON_TYPES = ("application/json",)


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8470
        return host[1 : host.find("]")] if "]" in host else host
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def refusal(headers: Headers, own_host: str) -> tuple[int, str, str] | None:
    """(HTTP status, canonical status, message) when the request may come from a web page,
    else None. `own_host`: the name or address the emulator listens on."""
    origin = headers.get("Origin")
    if origin is not None:
        return (
            403,
            "PERMISSION_DENIED",
            f"tpuctl emulator: a request from a web page (Origin: {origin[:200]}) is refused; "
            "the emulator answers local clients only (Google's clients, gcloud, curl, tpuctl)",
        )
    host = headers.get("Host")
    if host is None:
        return None  # HTTP/1.0 without a Host: not a browser's
    name = _hostname(host)
    if name in LOCAL_NAMES or _is_ip(name) or name == _hostname(own_host):
        return None
    return (
        403,
        "PERMISSION_DENIED",
        f"tpuctl emulator: Host {host[:200]!r} is not this emulator's address; "
        "use 127.0.0.1, localhost or the address it listens on",
    )


def body_refusal(headers: Headers, body: bytes) -> tuple[int, str, str] | None:
    """(HTTP status, canonical status, message) when `body` is not sent as JSON."""
    if not body.strip():
        return None
    kind = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if kind in JSON_TYPES or kind.endswith("+json"):
        return None
    return (
        415,
        "INVALID_ARGUMENT",
        f"tpuctl emulator: a request body of type {kind or 'none'!r} is refused; "
        "send JSON with Content-Type: application/json",
    )
