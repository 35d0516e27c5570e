"""Job spec files: `tpuctl run -f job.toml`, and `--print-spec` that writes one.

A job file is one flat TOML table whose keys are `run`'s options (flag names with `_`
for `-`), plus `script` and `args`, and an `[env]` table. `load` reads it and hands back
each value in the form its flag would have given it (durations as text, paths made
absolute from the file's folder, `zones` as `a,b`), checked by the same functions the
flags go through; the CLI then lets the flags the user gave win. Every error names the
file, the line and the key, and is a UsageError (exit 2).

`dump` writes such a file by hand (a flat table needs no TOML writer, toml_text.py
quotes its values), `[env]` last.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.catalog import canonical_accelerator
from tpuctl.cloud import registry
from tpuctl.config import shape_rule, split_zones
from tpuctl.durations import parse_duration, parse_seconds
from tpuctl.errors import TpuctlError, UsageError
from tpuctl.services import nodes
from tpuctl.services.cost import parse_dollars
from tpuctl.services.run.spec import MIN_SYNC_EVERY, parse_env
from tpuctl.services.run.toml_text import toml_key, toml_string, toml_value

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target
    from tpuctl.services.run.spec import RunSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


# key -> kind. The order is the order `dump` writes them in.
KEYS: dict[str, str] = {
    "script": "path",
    "args": "strings",
    "accelerator": "accelerator",
    "api": "api",
    "zone": "zone",
    "zones": "zones",
    "project": "project",
    "spot": "bool",
    "service_account": "string",
    "scopes": "strings",
    "preemptible": "bool",
    "reserved": "bool",
    "reservation": "string",
    "labels": "strings",
    "network": "string",
    "subnetwork": "string",
    "tags": "strings",
    "internal_ip_only": "bool",
    "queued": "bool",
    "slices": "count",
    "valid_until": "duration",
    "flex_start": "bool",
    "max_run_duration": "duration",
    "version": "string",
    "node": "string",
    "name": "string",
    "workdir": "path",
    "exclude": "strings",
    "setup": "string",
    "requirements": "path",
    "no_requirements": "bool",
    "rebuild_env": "bool",
    "system_site_packages": "bool",
    "env_file": "paths",
    "outputs": "path",
    "no_outputs": "bool",
    "bucket": "string",
    "restarts": "count",
    "repairs": "count",
    "retry_on_failure": "bool",
    "sync_every": "seconds",
    "hang_after": "wait",
    "ttl": "duration",
    "max_cost": "dollars",
    "start_deadline": "duration",
    "start_lease": "duration",
    "heartbeat_deadline": "duration",
    "teardown": "bool",
    "detach": "bool",
    "force": "bool",
    "no_check": "bool",
    "env": "env",
}
_WANTED = {
    "path": "a string (a path, relative to the file's folder)",
    "paths": "a string or a list of strings (paths, relative to the file's folder)",
    "string": "a string",
    "strings": "a list of strings",
    "accelerator": 'a string, an accelerator type like "v3-8"',
    "api": " or ".join(f'"{k.key}" ({k.called})' for k in registry.KINDS)
    + f' or "{registry.AUTO}" (any)',
    "zone": 'a string, a zone like "us-central1-a"',
    "zones": 'a list of zones, e.g. ["us-central2-b", "us-east5-a"]',
    "project": 'a string, a project id like "my-project"',
    "bool": "true or false",
    "duration": 'a duration: a string like "90s", "30m", "8h", "2d", or whole seconds',
    "count": "a whole number, 0 or more",
    "seconds": f"a number of seconds, at least {MIN_SYNC_EVERY:g}",
    "wait": 'a duration: a string like "10m", or seconds; 0 for none',
    "env": 'a table of names to strings, e.g. [env] then STEPS = "100"',
    "dollars": "a number of US dollars, e.g. 50 or 12.5",
}
_KEY_LINE = re.compile(
    r"""\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)  # noqa: E501
_TABLE_LINE = re.compile(r"\s*\[\s*([^\]\[]+?)\s*\]")


# A key -> the parameter of `run` (tpuctl/cli/run.py) it stands for, where names differ.
PARAM_OF = {"args": "script_args", "zones": "zone", "queued": "queued_flag", "env": "env_pairs"}
# Written by --print-spec even when left at their defaults: what the job would otherwise
# get from this tpuctl's defaults, which a teammate's may not share.
ALWAYS = ("accelerator", "spot", "restarts")


@dataclass
class JobFile:
    """A job file, read and checked: `values` in the form the flags give them."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, key: str) -> str:
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else str(self.path)

    @contextlib.contextmanager
    def blame(self, key: str) -> Iterator[None]:
        """Any tpuctl error inside becomes a UsageError naming the file, line and key."""
        try:
            yield
        except TpuctlError as e:
            entry = f"{key}.{e.entry}" if isinstance(e, _EntryError) else key
            at = self.where(entry if entry in self.lines else key)
            raise UsageError(f"{at}: {key}: {e.message}", hint=e.hint) from None


class _EntryError(UsageError):
    """A bad entry of a table (`[env]`): the error points at the entry's own line."""

    def __init__(self, entry: str, message: str) -> None:
        super().__init__(message)
        self.entry = entry


def _key_lines(text: str) -> dict[str, int]:
    """The line of each top-level key (and `env` for its table), found by reading the
    text: tomllib does not say where a key is. Lines inside multi-line strings and
    arrays of tables are not keys."""
    found: dict[str, int] = {}
    table = ""
    in_string: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if in_string:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        heading = _TABLE_LINE.match(line)
        if heading and not line.lstrip().startswith("[["):
            table = heading[1].split(".")[0].strip().strip("\"'")
            found.setdefault(table, number)
        else:
            match = _KEY_LINE.match(line)
            if match:
                key = match[1].split(".")[0].strip().strip("\"'")
                found.setdefault(table or key, number)
                if table:  # an entry of a table, for an error about it (`env.STEPS`)
                    found.setdefault(f"{table}.{key}", number)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
                break
    return found


def load(path: Path) -> JobFile:
    """Read and check a job file (UsageError, exit 2, on anything wrong with it)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read job file {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a job file: not UTF-8 text (TOML expected)") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # Python 3.14 gives lineno and colno; earlier ones only say them in the message.
        at = re.search(r" \(at line (\d+), column (\d+)\)", str(e))
        line = getattr(e, "lineno", None) or (int(at[1]) if at else None)
        column = getattr(e, "colno", None) or (int(at[2]) if at else None)
        reason = str(e)[: at.start()] if at else str(e)
        where = f"{path}:{line}" if line else str(path)
        col = f" (column {column})" if column else ""
        raise UsageError(f"{where}: not valid TOML: {reason}{col}") from None
    job = JobFile(path, lines=_key_lines(text))
    base = path.resolve().parent
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, list(KEYS), n=1)
        raise UsageError(
            f"{job.where(key)}: unknown key {key!r}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; allowed: {', '.join(sorted(KEYS))}"
        )
    if "zone" in table and "zones" in table:
        raise UsageError(f"{job.where('zones')}: zones: give zone or zones, not both")
    for key, value in table.items():
        with job.blame(key):
            job.values[key] = _convert(key, KEYS[key], value, base)
    return job


def _wrong(kind: str, value: Any) -> UsageError:
    shown = repr(value) if not isinstance(value, dict) else "a table"
    return UsageError(f"expected {_WANTED[kind]}, not {shown}")


def _path(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _convert(key: str, kind: str, value: Any, base: Path) -> Any:
    """One value, checked, in the form its flag gives it."""
    if kind == "bool":
        if not isinstance(value, bool):
            raise _wrong(kind, value)
        return value
    if kind in ("count", "seconds"):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if kind == "count" and not (number and isinstance(value, int) and value >= 0):
            raise _wrong(kind, value)
        if kind == "seconds" and not (number and value >= MIN_SYNC_EVERY):
            raise _wrong(kind, value)
        return value if kind == "count" else float(value)
    if kind == "wait":
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _wrong(kind, value)
        return parse_seconds(str(value), key)  # as the flag reads it
    if kind == "dollars":
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _wrong(kind, value)
        parse_dollars(str(value), "max_cost")  # the check --max-cost goes through
        return str(value)
    if kind == "duration":
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise _wrong(kind, value)
        text = str(value)
        parse_duration(text, "duration")  # the check --ttl and the others go through
        return text
    if kind in ("strings", "zones"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _wrong(kind, value)
        if kind == "zones":
            if not value:
                raise _wrong(kind, value)
            return ",".join(_zone(v) for v in value)
        return list(value)
    if kind == "paths":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
            raise _wrong(kind, value)
        return [_path(v, base) for v in items]
    if kind == "env":
        if not isinstance(value, dict):
            raise _wrong(kind, value)
        pairs = []
        for name, v in value.items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                raise _EntryError(name, f"{name}: expected a string, not {v!r}")
            try:
                if "=" in name:  # `A=B = "c"` would reach the script as A='B=c'
                    raise UsageError(name)
                parse_env([f"{name}={v}"], [])  # the check --env goes through
            except UsageError:
                raise _EntryError(
                    name,
                    f"{name!r} is not a variable name (letters, digits and _, not first a digit)",
                ) from None
            pairs.append(f"{name}={v}")
        return pairs
    if not isinstance(value, str):
        raise _wrong(kind, value)
    if kind == "path":
        return _path(value, base)
    if kind == "accelerator":
        return canonical_accelerator(value)  # the --accelerator flag's own callback
    if kind == "zone":
        return _zone(value)
    if kind == "api" and value not in (*registry.known(), registry.AUTO):
        raise _wrong(kind, value)
    if kind == "project":
        rule = shape_rule("project", value)
        if rule:
            raise UsageError(f"{value!r} is not a project id: {rule}")
    return value


def _zone(value: str) -> str:
    rule = shape_rule("zone", value)
    if rule:
        raise UsageError(f"{value!r} is not a zone: {rule}")
    return value


def shown_path(path: Path, cwd: Path | None = None) -> str:
    """A path as a job file written in the current folder names it: relative when it is
    inside that folder, else absolute."""
    cwd = (cwd or Path.cwd()).resolve()
    full = Path(os.path.abspath(path))
    try:
        return full.relative_to(cwd).as_posix() or "."
    except ValueError:
        return full.as_posix()


def dump(values: Mapping[str, Any], comment: str = "") -> str:
    """A job file holding `values` (TOML keys; scalars, lists, paths, `env` a mapping)."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    for key in KEYS:
        value = values.get(key)
        if value is None or key == "env":
            continue
        if isinstance(value, Path):
            value = shown_path(value)
        elif isinstance(value, list | tuple):
            value = [shown_path(v) if isinstance(v, Path) else v for v in value]
        with _naming(key):
            lines.append(f"{key} = {toml_value(value)}")
    env = values.get("env") or {}
    if env:
        lines += ["", "[env]"]
        for name, value in env.items():
            with _naming(f"env.{name}"):
                lines.append(f"{toml_key(name)} = {toml_string(value)}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _naming(key: str) -> Iterator[None]:
    try:
        yield
    except UsageError as e:
        raise UsageError(f"--print-spec: {key}: {e.message}") from None


def check_offered(
    tpu: TpuBackend, target: Target, job_file: JobFile, from_file: set[str], spec: RunSpec
) -> None:
    """The accelerator and runtime version a job file gave, asked of the API as a create
    asks (`nodes.check_accelerator`, `check_version`), so that a bad one is named with
    its line: offered in at least one of the zones. The create checks again, per zone."""
    if spec.node:  # an existing node's type is the node's
        return
    checks = [
        ("accelerator", lambda t: nodes.check_accelerator(tpu, t, spec.shape)),
        ("version", lambda t: nodes.check_version(tpu, t, spec.version or "")),
    ]
    for key, check in checks:
        if key not in from_file:
            continue
        refused: list[UsageError] = []
        for zone in target.candidates:
            try:
                check(target.in_zone(zone))
                break
            except UsageError as e:
                refused.append(e)
        else:
            with job_file.blame(key):
                if len(refused) == 1:
                    raise refused[0]
                raise UsageError(
                    "; ".join(e.message for e in refused), hint=refused[0].hint
                ) from None


def merge(params: dict[str, Any], given: set[str], job_file: JobFile) -> set[str]:
    """Put the file's values into `run`'s `params` where the user gave no flag (the
    script's args go with the script; `env` is merged name by name, flags last); the
    keys whose values were used."""
    used: set[str] = set()
    for key, value in job_file.values.items():
        param = PARAM_OF.get(key, key)
        if key == "env":  # per name: --env KEY=VALUE replaces that one
            params[param] = [*value, *params[param]]
        elif param in given or (key == "args" and "script" in given):
            continue
        else:
            params[param] = value
        used.add(key)
    return used


def spec_text(
    params: Mapping[str, Any], given: set[str], from_file: set[str], script: Path, restarts: int
) -> str:
    """The job file (`--print-spec`) for `run`'s `params`: the options given as flags or
    by a file read, `ALWAYS` ones, the script and its args."""
    values: dict[str, Any] = {"script": script, "args": list(params["script_args"] or [])}
    for key in KEYS:
        param = PARAM_OF.get(key, key)
        special = key in ("script", "args", "zone", "zones", "env")
        if (special or not (param in given or key in from_file)) and key not in ALWAYS:
            continue
        values[key] = params[param]
    values["restarts"] = restarts
    if params["zone"]:
        zones = split_zones(params["zone"])
        values["zone" if len(zones) == 1 else "zones"] = zones[0] if len(zones) == 1 else zones
    if len(params["env_file"]) == 1:
        values["env_file"] = params["env_file"][0]
    values["env"] = parse_env(params["env_pairs"], [])
    comment = (
        "A tpuctl job: `tpuctl run -f THIS_FILE` runs it; flags given then win.\n"
        "Relative paths are from this file's folder (written for one in the current folder)."
    )
    return dump(values, comment)
