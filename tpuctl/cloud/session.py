"""google-auth's credentials over the standard library's HTTP client: the session every REST
call of tpuctl goes through (cloud/rest.py), and the transport that refreshes the
credentials (google-auth's documented `google.auth.transport.Request` interface).

Not google-auth's `AuthorizedSession`: it stands on requests, and importing requests,
urllib3 and google-auth's requests transport costs about 100 ms of every command that
reads the cloud, more than the rest of `tpuctl list` (bench/run.py). What it does for the
calls tpuctl makes is done here the same way: the credentials add their headers before
each request (`before_request`: the token, refreshed when due, and the quota project),
a 401 refreshes them and sends again (at most twice, as google-auth's default), the
proxy comes from `https_proxy`/`http_proxy`/`no_proxy` (urllib's `ProxyHandler`, as
requests reads them), and TLS is verified against `REQUESTS_CA_BUNDLE` or
`CURL_CA_BUNDLE` when set, else certifi's bundle, as requests does. Beyond that:

- A redirect is never followed: a 3xx is the answer, an error to the caller (urllib would
  otherwise send the Authorization header on to wherever the redirect points).
- An answer is read in bounded memory: at most `MAX_ANSWER` bytes (no compression is
  asked for, so these are the bytes decoded), else a `CloudError` naming the URL.
- A transport fault (refused, reset, timed out, cut short) is google-auth's
  `TransportError`, which cloud/retry.py retries; a certificate that does not verify is
  a `CloudError` at once, saying how to trust a proxy's CA.
- With `--debug`, each call is a line on the `tpuctl.http` logger, in urllib3's words
  (`http://host:port "GET /path HTTP/1.1" 200 123`), scrubbed as every line is.
"""

from __future__ import annotations

import http.client
import json as jsonlib
import logging
import os
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from google.auth import exceptions as auth_x
from google.auth import transport

from tpuctl import __version__
from tpuctl.errors import CloudError, ConfigError

log = logging.getLogger("tpuctl.http")

MAX_ANSWER = 64 * 1024 * 1024  # a page of a list (the billing catalog's are the largest)
TIMEOUT = 120.0  # google-auth's default for a call that names none
_REFRESH_STATUS = 401
_MAX_REFRESHES = 2  # google.auth.transport.DEFAULT_MAX_REFRESH_ATTEMPTS
_USER_AGENT = f"tpuctl/{__version__}"  # what the API's audit and error logs name


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx is handed back as it is


_context_lock = threading.Lock()
_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    """The TLS context, made once (loading the CA bundle costs a few ms: https only)."""
    global _context
    with _context_lock:
        if _context is None:
            named = [v for v in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE") if os.environ.get(v)]
            if named:
                bundle = os.environ[named[0]]
            else:
                import certifi

                bundle = certifi.where()
            try:
                _context = ssl.create_default_context(cafile=bundle)
            except (OSError, ssl.SSLError) as e:  # ssl.SSLError: not PEM certificates
                told = f"{named[0]}={bundle}" if named else f"certifi's bundle {bundle}"
                raise ConfigError(
                    f"cannot load the CA certificates of {told}: {e.strerror or e}",
                    hint="name a readable PEM file of CA certificates, or unset it",
                ) from e
        return _context


def _opener(url: str) -> urllib.request.OpenerDirector:
    handlers: list[Any] = [_NoRedirect()]
    if url.startswith("https:"):
        handlers.append(urllib.request.HTTPSHandler(context=_tls()))
    return urllib.request.build_opener(*handlers)  # with the environment's proxies


class _Sent:
    """What google-api-core's `from_http_response` reads of a response's request."""

    def __init__(self, method: str, url: str) -> None:
        self.method = method
        self.url = url


class Response:
    """An HTTP answer, read whole (bounded): the part of requests' Response that tpuctl and
    google-api-core's `from_http_response` read."""

    def __init__(self, method: str, url: str, status: int, headers: Any, content: bytes) -> None:
        self.request = _Sent(method, url)
        self.status_code = status
        self.headers: Mapping[str, str] = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)


def _read(stream: Any, url: str) -> bytes:
    """The whole body, a MiB at a time (a read of the whole bound at once would allocate
    it up front for an answer of no stated length), refused past MAX_ANSWER."""
    parts: list[bytes] = []
    size = 0
    while chunk := stream.read(min(2**20, MAX_ANSWER + 1 - size)):
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER:
            raise CloudError(
                f"the answer from {url.split('?')[0]} is over {MAX_ANSWER // 2**20} MiB; "
                "tpuctl reads no more of it"
            )
    return b"".join(parts)


def send(
    method: str,
    url: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Response:
    """One HTTP request, no credentials added: its answer whatever its status, or
    `TransportError` when none came."""
    request = urllib.request.Request(url, data=body, method=method)
    request.add_header("User-Agent", _USER_AGENT)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        try:
            stream = _opener(url).open(request, timeout=timeout or TIMEOUT)
        except urllib.error.HTTPError as answer:  # a 3xx, 4xx or 5xx: an answer all the same
            stream = answer
        with stream:
            content = _read(stream, url)
            status = int(stream.status or stream.getcode())
            answer_headers = stream.headers
    except urllib.error.URLError as e:
        if isinstance(e.reason, ssl.SSLCertVerificationError):  # no retry makes it verify
            host = urllib.parse.urlsplit(url).netloc
            raise CloudError(
                f"the TLS certificate of {host} did not verify: {e.reason.verify_message}",
                hint="behind a proxy that inspects TLS, set REQUESTS_CA_BUNDLE to a file of "
                "the CA certificates it signs with",
            ) from e
        raise auth_x.TransportError(f"{method} {url}: {e.reason}") from e
    except (OSError, http.client.HTTPException) as e:  # reset, timed out, cut short
        raise auth_x.TransportError(f"{method} {url}: {e!r}") from e
    if log.isEnabledFor(logging.DEBUG):
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        log.debug(
            '%s://%s "%s %s HTTP/1.1" %s %s',
            parts.scheme,
            parts.netloc,
            method,
            path,
            status,
            len(content),
        )
    return Response(method, url, status, answer_headers, content)


class _AuthAnswer(transport.Response):
    def __init__(self, answer: Response) -> None:
        self._answer = answer

    @property
    def status(self) -> int:
        return self._answer.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._answer.headers

    @property
    def data(self) -> bytes:
        return self._answer.content


class Request(transport.Request):
    """google-auth's transport interface over `send`: what refreshes credentials."""

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _AuthAnswer:
        return _AuthAnswer(send(method, url, body, headers, timeout))


class AuthorizedSession:
    """Calls with `credentials`' headers, as google-auth's AuthorizedSession makes them."""

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self._auth = Request()

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        if params:
            query = urllib.parse.urlencode(
                {k: v for k, v in params.items() if v is not None}, doseq=True
            )
            url = f"{url}{'&' if '?' in url else '?'}{query}" if query else url
        sent = dict(headers or {})
        body = None
        if json is not None:
            body = jsonlib.dumps(json).encode()
            sent.setdefault("Content-Type", "application/json")
        for refreshes in range(_MAX_REFRESHES + 1):
            now = dict(sent)
            self.credentials.before_request(self._auth, method, url, now)
            answer = send(method, url, body, now, timeout)
            if answer.status_code != _REFRESH_STATUS or refreshes == _MAX_REFRESHES:
                return answer
            log.info("refreshing the credentials after a %s", answer.status_code)
            self.credentials.refresh(self._auth)
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, url: str, **kw: Any) -> Response:
        return self.request("GET", url, **kw)
