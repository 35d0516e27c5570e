"""Job spec files: `tpuctl run -f job.toml`, and `--print-spec` that writes one.

A job file is one flat TOML table whose keys are `run`'s options (flag names with `_`
for `-`), plus `script` and `args`, and an `[env]` table. The keys and the kind of
value each takes are run's options' (options.py, kinds.py): `load` reads each value into
the type the request holds (durations in seconds, paths made absolute from the file's
folder, `zones` as `a,b` as --zone gives them), checked by the same functions the flags
go through; the CLI then lets the flags the user gave win. Every error names the
file, the line and the key, and is a UsageError (exit 2).

`dump` writes such a file by hand (a flat table needs no TOML writer, toml_text.py
quotes its values), `[env]` last.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.config import split_zones
from tpuctl.errors import TpuctlError, UsageError
from tpuctl.services import nodes
from tpuctl.services.run.kinds import ZONES, EntryError, Kind, shown_path
from tpuctl.services.run.options import OPTIONS
from tpuctl.services.run.spec import parse_env
from tpuctl.services.run.toml_text import toml_key, toml_string, toml_value

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.config import Target
    from tpuctl.services.run.spec import RunSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ALWAYS",
    "KEYS",
    "PARAM_OF",
    "JobFile",
    "check_offered",
    "dump",
    "load",
    "merge",
    "shown_path",
    "spec_text",
]


def _keys() -> dict[str, Kind]:
    """key -> kind, from run's options (options.py), `zones` after `zone` (a second key
    for --zone: a list). The order is the order `dump` writes them in."""
    keys: dict[str, Kind] = {}
    for o in OPTIONS:
        if o.key:
            keys[o.key] = o.kind
        if o.key == "zone":
            keys["zones"] = ZONES
    return keys


KEYS = _keys()
# A key -> the option (run's parameter, the request's field) it stands for, where named apart
PARAM_OF = {o.key: o.name for o in OPTIONS if o.key and o.key != o.name} | {"zones": "zone"}
_KEY_LINE = re.compile(
    r"""\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)  # noqa: E501
_TABLE_LINE = re.compile(r"\s*\[\s*([^\]\[]+?)\s*\]")

# Written by --print-spec even when left at their defaults (options.py: `always`)
ALWAYS = tuple(o.key for o in OPTIONS if o.always and o.key)


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
            entry = f"{key}.{e.entry}" if isinstance(e, EntryError) else key
            at = self.where(entry if entry in self.lines else key)
            raise UsageError(f"{at}: {key}: {e.message}", hint=e.hint) from None


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
            job.values[key] = KEYS[key].read(value, base, key)
    return job


def dump(values: Mapping[str, Any], comment: str = "") -> str:
    """A job file holding `values` (TOML keys; scalars, lists, paths, `env` a mapping)."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    for key in KEYS:
        value = values.get(key)
        if value is None or key == "env":
            continue
        value = KEYS[key].show(value)
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
    params: Mapping[str, Any],
    given: set[str],
    from_file: set[str],
    script: Path | str | None,
    restarts: int,
) -> str:
    """The job file (`--print-spec`) for `run`'s `params`: the options given as flags or
    by a file read, `ALWAYS` ones, the script (a command of an --image: as typed; none:
    the image's own) and its args."""
    values: dict[str, Any] = {"args": list(params["script_args"] or [])}
    if script is not None:
        values = {"script": script, **values}
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
    values["env"] = parse_env(params["env_pairs"], [])
    comment = (
        "A tpuctl job: `tpuctl run -f THIS_FILE` runs it; flags given then win.\n"
        "Relative paths are from this file's folder (written for one in the current folder)."
    )
    return dump(values, comment)
