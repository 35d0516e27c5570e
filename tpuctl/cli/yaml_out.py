"""YAML for --format=yaml without a YAML library: the shapes tpuctl prints (mappings,
lists, strings, numbers, booleans, null), every string that a YAML reader could take for
something else written as a JSON string, which YAML 1.2 reads as the same string."""

from __future__ import annotations

import json
import re
from typing import Any

# plain scalars that read back as the same string (no indicator first, no `: ` or ` #`)
_PLAIN = re.compile(r"[A-Za-z_./][\w./@+-]*(?: [\w./@+-]+)*")
_SPECIAL = re.compile(
    r"(?i)(?:y|n|yes|no|on|off|true|false|null|~|[-+]?(?:\.inf|\.nan)|[-+]?[\d._]+(?:e[-+]?\d+)?)"
)


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and not _SPECIAL.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _key(key: Any) -> str:
    return scalar(str(key))


def _lines(value: Any, indent: str) -> list[str]:
    """Lines for a mapping or list at `indent` (a scalar is one line on its own)."""
    if isinstance(value, dict):
        if not value:
            return [indent + "{}"]
        out = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{indent}{_key(k)}:")
                out.extend(_lines(v, indent + ("  " if isinstance(v, dict) else "")))
            else:
                out.append(f"{indent}{_key(k)}: {_inline(v)}")
        return out
    if isinstance(value, list):
        if not value:
            return [indent + "[]"]
        out = []
        for item in value:
            if isinstance(item, dict | list) and item:
                inner = _lines(item, indent + "  ")
                out.append(f"{indent}- {inner[0].lstrip()}")
                out.extend(inner[1:])
            else:
                out.append(f"{indent}- {_inline(item)}")
        return out
    return [indent + scalar(value)]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return scalar(value)


def dump(value: Any) -> str:
    """One YAML document."""
    return "\n".join(_lines(value, "")) + "\n"


def dump_all(rows: list[Any]) -> str:
    """A list of resources as gcloud prints them: one document each, `---` between."""
    return "---\n".join(dump(r) for r in rows)
