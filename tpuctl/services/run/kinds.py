"""The kinds of value `tpuctl run`'s options take (options.py declares which option takes
which): how a job file's TOML value is checked and read, how a flag's text is read, and
how a value is written back into a job file (`--print-spec`). Each reads into the one
type the option has in the request (durations in seconds, dollars as a float, paths as
`Path`), so flags and a job file meet in the same values.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.cloud import registry
from tpuctl.durations import parse_duration, parse_seconds
from tpuctl.errors import UsageError
from tpuctl.services.run.spec import MIN_SYNC_EVERY

Check = Callable[["Kind", Any, Path, str], Any]  # kind, value, the file's folder, key


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Kind:
    """What a job file must give (said in an error: `expected ...`), and the readers."""

    wanted: str
    check: Check  # a job file's value -> the option's (UsageError when wrong)
    text: Callable[[str, str], Any] | None = None  # a flag's text, its flag -> the value
    show: Callable[[Any], Any] = _same  # the value -> what a job file writes
    metavar: str | None = None  # what the flag takes, in its help

    def read(self, value: Any, base: Path, key: str) -> Any:
        """A job file's `value` for `key`, checked, in the option's type."""
        return self.check(self, value, base, key)


class EntryError(UsageError):
    """A bad entry of a table (`[env]`): the error points at the entry's own line."""

    def __init__(self, entry: str, message: str) -> None:
        super().__init__(message)
        self.entry = entry


def wrong(kind: Kind, value: Any) -> UsageError:
    shown = repr(value) if not isinstance(value, dict) else "a table"
    return UsageError(f"expected {kind.wanted}, not {shown}")


def _kind(wanted: str, **kw: Any) -> Callable[[Check], Kind]:
    """The Kind whose check is the decorated function."""
    return lambda check: Kind(wanted, check, **kw)


def shown_path(path: Path, cwd: Path | None = None) -> str:
    """A path as a job file written in the current folder names it: relative when it is
    inside that folder, else absolute."""
    cwd = (cwd or Path.cwd()).resolve()
    full = Path(os.path.abspath(path))
    try:
        return full.relative_to(cwd).as_posix() or "."
    except ValueError:
        return full.as_posix()


def _path(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _string(kind: Kind, value: Any) -> str:
    if not isinstance(value, str):
        raise wrong(kind, value)
    return value


@_kind("a string")
def STRING(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    return _string(kind, value)


@_kind("a string (a path, relative to the file's folder)", show=shown_path)
def PATH(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    return _path(_string(kind, value), base)


@_kind(
    "a string or a list of strings (paths, relative to the file's folder)",
    show=lambda v: shown_path(v[0]) if len(v) == 1 else [shown_path(p) for p in v],
)
def PATHS(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        raise wrong(kind, value)
    return [_path(v, base) for v in items]


@_kind("a list of strings")
def STRINGS(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise wrong(kind, value)
    return list(value)


@_kind('a string, an accelerator type like "v3-8"')
def ACCELERATOR(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    from tpuctl.catalog import canonical_accelerator

    return canonical_accelerator(_string(kind, value))  # the --accelerator flag's callback


@_kind(
    " or ".join(f'"{k.key}" ({k.called})' for k in registry.KINDS) + f' or "{registry.AUTO}" (any)'
)
def API(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if _string(kind, value) not in (*registry.known(), registry.AUTO):
        raise wrong(kind, value)
    return value


def zone(value: str) -> str:
    from tpuctl.config import shape_rule

    rule = shape_rule("zone", value)
    if rule:
        raise UsageError(f"{value!r} is not a zone: {rule}")
    return value


@_kind('a string, a zone like "us-central1-a"')
def ZONE(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    return zone(_string(kind, value))


@_kind('a list of zones, e.g. ["us-central2-b", "us-east5-a"]')
def ZONES(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise wrong(kind, value)
    return ",".join(zone(v) for v in value)  # as --zone a,b gives them


@_kind('a string, a project id like "my-project"')
def PROJECT(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    from tpuctl.config import shape_rule

    rule = shape_rule("project", _string(kind, value))
    if rule:
        raise UsageError(f"{value!r} is not a project id: {rule}")
    return value


@_kind("true or false")
def BOOL(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if not isinstance(value, bool):
        raise wrong(kind, value)
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@_kind("a whole number, 0 or more")
def COUNT(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if not (_number(value) and isinstance(value, int) and value >= 0):
        raise wrong(kind, value)
    return value


@_kind(
    f"a number of seconds, at least {MIN_SYNC_EVERY:g}",
    text=lambda t, flag: parse_seconds(t, flag, MIN_SYNC_EVERY),
    metavar="DURATION",
)
def SECONDS(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if not (_number(value) and value >= MIN_SYNC_EVERY):
        raise wrong(kind, value)
    return float(value)


@_kind(
    'a duration: a string like "10m", or seconds; 0 for none',
    text=parse_seconds,
    metavar="DURATION",
)
def WAIT(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise wrong(kind, value)
    return parse_seconds(str(value), key)  # as the flag reads it


@_kind(
    'a duration: a string like "90s", "30m", "8h", "2d", or whole seconds',
    text=parse_duration,
    show=lambda v: _duration_text(v),
    metavar="DURATION",
)
def DURATION(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise wrong(kind, value)
    return parse_duration(str(value), "duration")


def _duration_text(seconds: int) -> str:
    """Seconds as a job file writes them: in the largest unit that holds them whole."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _dollars(text: str, flag: str) -> float:
    from tpuctl.services.cost import parse_dollars

    return parse_dollars(text, flag)


@_kind("a number of US dollars, e.g. 50 or 12.5", text=_dollars, show=lambda v: f"{v:g}")
def DOLLARS(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise wrong(kind, value)
    return _dollars(str(value), "max_cost")  # the check --max-cost goes through


@_kind('a table of names to strings, e.g. [env] then STEPS = "100"')
def ENV(kind: Kind, value: Any, base: Path, key: str) -> Any:  # noqa: N802
    """`[env]` as the --env flags give it: NAME=VALUE, each checked as --env checks."""
    from tpuctl.services.run.spec import parse_env

    if not isinstance(value, dict):
        raise wrong(kind, value)
    pairs = []
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise EntryError(name, f"{name}: expected a string, not {v!r}")
        try:
            if "=" in name:  # `A=B = "c"` would reach the script as A='B=c'
                raise UsageError(name)
            parse_env([f"{name}={v}"], [])
        except UsageError:
            raise EntryError(
                name, f"{name!r} is not a variable name (letters, digits and _, not first a digit)"
            ) from None
        pairs.append(f"{name}={v}")
    return pairs


def counted(most: int) -> Kind:
    """COUNT whose flag takes 0 to `most`, refused in those words."""

    def text(value: str, flag: str) -> int:
        t = value.strip()
        if not (t.isascii() and t.isdigit() and int(t) <= most):
            raise UsageError(f"invalid {flag} {value!r}: a whole number 0 to {most}")
        return int(t)

    return dataclasses.replace(COUNT, text=text, metavar="N")
