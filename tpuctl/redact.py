"""The `--debug` trace, with every credential taken out.

`--debug` shows each HTTP call as urllib3 logs it (method, URL, status, size, with the
time of each line) and tpuctl's own debug lines. It never shows a credential: users
paste this output into issues and CI logs. Every line goes through `scrub`, which takes
out bearer and basic credentials, OAuth tokens (`ya29.`), refresh tokens, client
secrets, private keys and passwords in JSON or form bodies, signed URLs' signatures and
API keys in query strings, and the values of the job's `--env`/`--env-file` (registered
with `secret`). http.client's own trace (`debuglevel`), which prints whole headers and
bodies, is never switched on.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable

REDACTED = "[redacted]"
_KEYS = (
    r"refresh_token|access_token|id_token|client_secret|private_key|private_key_id|"
    r"password|passwd|assertion|subject_token|token|secret|api_key|apikey"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer ya29...; Proxy-Authorization: Basic ...; 'authorization': '...'
    (
        re.compile(
            r"(?i)((?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic)\s+)?"
            r"[^\s'\",}]+"
        ),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    (re.compile(r"\bya29\.[0-9A-Za-z_.\-]+"), "ya29." + REDACTED),  # Google access tokens
    (re.compile(r"\b1//[0-9A-Za-z_\-]{10,}"), "1//" + REDACTED),  # Google refresh tokens
    # "refresh_token": "..." and refresh_token=... (JSON bodies, form bodies, queries)
    (re.compile(rf"(?i)([\"']?\b(?:{_KEYS})[\"']?\s*:\s*[\"'])[^\"']*"), r"\1" + REDACTED),
    (re.compile(rf"(?i)(\b(?:{_KEYS})=)[^&\s\"',]+"), r"\1" + REDACTED),
    # signed URLs (V4 and V2) and API keys in a query string
    (
        re.compile(r"(?i)\b(x-goog-signature|x-goog-credential|signature|key|sig)=[^&\s\"']+"),
        r"\1=" + REDACTED,
    ),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        REDACTED,
    ),
)
_secrets: set[str] = set()
_lock = threading.Lock()
MIN_SECRET = 4  # shorter values are not scrubbed: they would cut up every other word


def secret(values: Iterable[str]) -> None:
    """Values that must never be shown (a job's environment): scrubbed from the trace."""
    with _lock:
        _secrets.update(v for v in values if len(v) >= MIN_SECRET)


def scrub(text: str) -> str:
    """`text` with every credential it carries replaced by [redacted]."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for value in known:
        text = text.replace(value, REDACTED)
    return text


class Scrubbing(logging.Filter):
    """Formats each record and scrubs it, so no handler ever sees a credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


def install(debug: bool) -> None:
    """Turn the trace on (or back off): DEBUG logging to stderr through the scrubber."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if getattr(h, "tpuctl_trace", False)), None)
    if debug and handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.tpuctl_trace = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        handler.addFilter(Scrubbing())
        root.addHandler(handler)
    for h in root.handlers:  # a handler someone else added is scrubbed too
        if not any(isinstance(f, Scrubbing) for f in h.filters):
            h.addFilter(Scrubbing())
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    if "http.client" in sys.modules:
        sys.modules["http.client"].HTTPConnection.debuglevel = 0  # headers and bodies: never
