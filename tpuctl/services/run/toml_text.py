"""TOML values as text, for the job files `tpuctl run --print-spec` writes: what a flat
table needs (strings, numbers, booleans, arrays), with no TOML writer to depend on."""

from __future__ import annotations

import re
from typing import Any

from tpuctl.errors import UsageError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_string(value: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, other
    characters (non-ASCII included) as they are. A lone surrogate (undecodable bytes of
    a file name or argument) has no TOML form: a UsageError."""
    out = []
    for ch in value:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise UsageError(f"{value!r} is not text (undecodable bytes): TOML cannot hold it")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A key, bare where TOML allows, else quoted."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value: Any) -> str:
    """A boolean, number, string or array of them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "inf" if value == float("inf") else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")  # pragma: no cover - a bug
