"""tpuctl's own config file (read, and written by `tpuctl init`), the active gcloud
configuration read as a file, where local state and caches live, what a project id, a
zone and a region look like, and the `Target` a command works on. Where project and zone
come from (flags, environment, these files, the endpoint's defaults) is
`target_resolution.py`'s."""

from __future__ import annotations

import configparser
import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuctl.errors import ConfigError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def config_file_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("TPUCTL_CONFIG"):
        return Path(env["TPUCTL_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else _home(env) / ".config"
    return base / "tpuctl" / "config.toml"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where tpuctl keeps local state that is not the cloud's (audit log, known hosts)."""
    env = os.environ if env is None else env
    if env.get("TPUCTL_STATE_DIR"):
        return Path(env["TPUCTL_STATE_DIR"]).expanduser()
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else _home(env) / ".local/state"
    return base / "tpuctl"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where tpuctl keeps what it can read again (the price catalog): $TPUCTL_CACHE_DIR,
    else $XDG_CACHE_HOME/tpuctl, else ~/.cache/tpuctl."""
    env = os.environ if env is None else env
    if env.get("TPUCTL_CACHE_DIR"):
        return Path(env["TPUCTL_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else _home(env) / ".cache"
    return base / "tpuctl"


def load_config_file(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """tpuctl's config file as a dict ({} when absent); a malformed file is a ConfigError."""
    path = config_file_path(env)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise ConfigError(
            f"cannot read tpuctl's config file {path}: not UTF-8 text (TOML)",
            hint="fix or remove that file",
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(
            f"cannot read tpuctl's config file {path}: {e}", hint="fix or remove that file"
        ) from e


PER_PROJECT = ("zone", "zones", "bucket")  # keys a `[projects."ID"]` table may set


def for_project(config: Mapping[str, Any], project: str) -> dict[str, Any]:
    """The config file's values for `project`: its `[projects."ID"]` table's zone, zones
    and bucket over the top-level ones (a zone set there replaces a top-level zones list,
    and the other way round), so one project's jobs never go to another's bucket."""
    projects = config.get("projects")
    own = projects.get(project) if isinstance(projects, Mapping) else None
    if not isinstance(own, Mapping):
        return dict(config)
    merged = {k: v for k, v in config.items() if k != "projects"}
    if "zone" in own or "zones" in own:
        merged.pop("zone", None)
        merged.pop("zones", None)
    merged.update({k: v for k, v in own.items() if k in PER_PROJECT})
    return merged


def configured_service_account(env: Mapping[str, str] | None = None) -> str | None:
    """The config file's `service_account`: what new TPU VMs run as when no
    --service-account is given (None: the project's default compute account)."""
    value = load_config_file(env).get("service_account")
    if value is None:
        return None
    if not isinstance(value, str) or "@" not in value:
        raise ConfigError(
            f"service_account = {value!r} in {config_file_path(env)}: expected a service "
            "account's email address",
            hint="fix or remove that line",
        )
    return value


def _gcloud_dir(env: Mapping[str, str]) -> Path:
    if env.get("CLOUDSDK_CONFIG"):
        return Path(env["CLOUDSDK_CONFIG"]).expanduser()
    return _home(env) / ".config" / "gcloud"


def gcloud_properties(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`core/project`, `compute/zone` and `core/account` of the active gcloud
    configuration, without gcloud."""
    env = os.environ if env is None else env
    root = _gcloud_dir(env)
    name = env.get("CLOUDSDK_ACTIVE_CONFIG_NAME")
    if not name:
        try:
            name = (root / "active_config").read_text().strip() or "default"
        except OSError:
            name = "default"
    parser = configparser.ConfigParser()
    try:
        parser.read(root / "configurations" / f"config_{name}", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return {}  # gcloud's file, and gcloud's to complain about
    props: dict[str, str] = {}
    for section, key in (("core", "project"), ("compute", "zone"), ("core", "account")):
        if parser.has_option(section, key):
            value = parser.get(section, key).strip()
            if value:
                props[f"{section}/{key}"] = value
    return props


# -- what a project id, a zone and a region look like ------------------------------
_PROJECT = re.compile(r"(?:[a-z][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
_REGION = r"[a-z]+(?:-[a-z]+)*[0-9]+"
_SHAPES = {
    "project": (
        _PROJECT,
        "a project id is 6 to 30 lowercase letters, digits and hyphens, starting with a "
        "letter and not ending with a hyphen (optionally after a `domain:` prefix)",
    ),
    "zone": (re.compile(rf"{_REGION}-[a-z]|-"), "a zone looks like us-central1-a"),
    "region": (re.compile(_REGION), "a region looks like us-central1"),
}


def shape_rule(kind: str, value: str) -> str | None:
    """None when `value` has the shape of a `kind` ("project", "zone", "region"), else
    the rule it breaks (the one check behind flags, the config file and job files)."""
    pattern, rule = _SHAPES[kind]
    return None if pattern.fullmatch(value) else rule


def check_shape(kind: str, value: str, source: str) -> str:
    """`value` when it has the shape of a `kind` ("project", "zone", "region"); else a
    UsageError when `source` is a flag (`--zone`), a ConfigError naming the source."""
    rule = shape_rule(kind, value)
    if rule is None:
        return value
    shown = value if len(value) <= 64 else value[:61] + "..."
    if source.startswith("--"):
        raise UsageError(f"invalid {source} {shown!r}: {rule}")
    raise ConfigError(f"invalid {kind} {shown!r} (from {source}): {rule}")


def split_zones(value: str, source: str = "--zone") -> list[str]:
    """`us-central2-b,us-east5-a` -> the zones in order (each checked, repeats dropped);
    an empty item is refused, as a flag's error (exit 2) or the source's (exit 3)."""
    items = [z.strip() for z in value.split(",")]
    if any(not z for z in items):
        message = f"invalid {source} {value!r}: an empty zone in the list"
        rule = "give zones separated by commas, e.g. us-central2-b,us-east5-a"
        if source.startswith("--"):
            raise UsageError(f"{message}; {rule}")
        raise ConfigError(f"{message}; {rule}")
    return list(dict.fromkeys(check_shape("zone", z, source) for z in items))


class NotSetUp(ConfigError):
    """No project (or no zone) anywhere tpuctl looks; `missing` names each absent one."""

    def __init__(self, message: str, hint: str, missing: tuple[str, ...]) -> None:
        super().__init__(message, hint)
        self.missing = missing


@dataclass(frozen=True)
class Target:
    """The project and zone a command works on, and where each came from.

    `zones`: for the commands that fail over (`run`), every zone to try, in order;
    `zone` is the one in use (the first until a failover moves on)."""

    project: str
    zone: str
    project_source: str = ""
    zone_source: str = ""
    zones: tuple[str, ...] = ()

    @property
    def candidates(self) -> tuple[str, ...]:
        """The zones to try, in order (just `zone` when no list was given)."""
        return self.zones or (self.zone,)

    def in_zone(self, zone: str) -> Target:
        """The same target in another of its zones."""
        return dataclasses.replace(self, zone=zone)

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}"


def login_name() -> str:
    """The local user's login name, "" when the system cannot say (no passwd entry)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "")


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def project_table(project: str) -> str:
    """The header of a project's table in the config file: `[projects."my-project"]`."""
    return f"[projects.{_toml_string(project)}]"


def write_config_values(
    values: Mapping[str, str],
    env: Mapping[str, str] | None = None,
    project: str | None = None,
) -> Path:
    """Set string keys of tpuctl's config file, top-level or (with `project`) in that
    project's table, keeping every other line (other keys, tables, comments) as it is;
    written atomically. Returns the file's path."""
    path = config_file_path(env)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    header = project_table(project) if project else None
    if header is None:
        start = 0
    else:
        found = [i for i, ln in enumerate(lines) if _same_header(ln, project or "")]
        if not found:
            lines += ([""] if lines and lines[-1].strip() else []) + [header]
            found = [len(lines) - 1]
        start = found[0] + 1
    end = next(
        (i for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines)
    )
    head, body, tail = lines[:start], lines[start:end], lines[end:]
    for key, value in values.items():
        line = f"{key} = {_toml_string(value)}"
        pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
        at = next((i for i, ln in enumerate(body) if pattern.match(ln)), None)
        if at is None:
            while body and not body[-1].strip():  # before the blank line ending the table
                tail.insert(0, body.pop())
            body.append(line)
        else:
            body[at] = line
    if tail and body and body[-1].strip() and tail[0].strip():
        body.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(head + body + tail) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _same_header(line: str, project: str) -> bool:
    """Whether `line` opens the table of `project` (quoted or bare)."""
    text = line.strip()
    return text in (project_table(project), f"[projects.{project}]", f"[projects.'{project}']")
