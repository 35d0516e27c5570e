"""Where project and zone come from, and tpuctl's own config file.

Order (first hit wins): command flags; TPUCTL_PROJECT / TPUCTL_ZONE; gcloud's own
environment overrides (CLOUDSDK_CORE_PROJECT / CLOUDSDK_COMPUTE_ZONE); tpuctl's
config file ($TPUCTL_CONFIG or ~/.config/tpuctl/config.toml); the active gcloud
configuration, read as a file; last, defaults offered by the endpoint in use
(the local emulator offers a demo project and zone, the cloud offers none).
"""

from __future__ import annotations

import configparser
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Mapping
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
_EXAMPLE = {"project": "a project id like my-project", "zone": "a zone like us-central1-a"}


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


def _file_zone(file_cfg: Mapping[str, Any], path: Path) -> str | list[str] | None:
    """The config file's `zone = "..."` or `zones = ["...", ...]` (not both)."""
    zone, zones = file_cfg.get("zone"), file_cfg.get("zones")
    if zone is not None and zones is not None:
        raise ConfigError(
            f"both zone and zones are set in {path}: set one",
            hint='zones = [...] lists zones to try in order (run); zone = "..." is one zone',
        )
    if zones is None:
        if zone is not None and not isinstance(zone, str):
            raise ConfigError(
                f"zone = {zone!r} in {path}: expected a string, {_EXAMPLE['zone']}",
                hint="several zones to try in order: zones = [...]",
            )
        return zone
    if not isinstance(zones, list) or not zones or not all(isinstance(z, str) and z for z in zones):
        raise ConfigError(
            f"zones = {zones!r} in {path}: expected a list of zones, "
            '["us-central2-b", "us-east5-a"]'
        )
    return list(zones)


def _lookup(
    key: str,
    flag: str | None,
    env: Mapping[str, str],
    file_cfg: Mapping[str, Any],
    gcloud: Mapping[str, str],
    fallback: Callable[[], Mapping[str, str]],
    many: bool = False,
) -> tuple[list[str], str, list[str]]:
    """One value through the chain; returns (values, source, places looked).

    Only a zone can be several: a comma list in --zone (when `many`), or the config
    file's `zones` (a command that takes one zone uses its first)."""
    tpuctl_env = {"project": "TPUCTL_PROJECT", "zone": "TPUCTL_ZONE"}[key]
    cloudsdk_env = {"project": "CLOUDSDK_CORE_PROJECT", "zone": "CLOUDSDK_COMPUTE_ZONE"}[key]
    gcloud_key = {"project": "core/project", "zone": "compute/zone"}[key]
    path = config_file_path(env)
    in_file = "zone = ... or zones = [...]" if key == "zone" else f"{key} = ..."

    def from_file() -> Any:
        return _file_zone(file_cfg, path) if key == "zone" else file_cfg.get(key)

    chain: list[tuple[str, Callable[[], Any]]] = [
        (f"--{key}", lambda: flag),
        (f"${tpuctl_env}", lambda: env.get(tpuctl_env)),
        (f"${cloudsdk_env}", lambda: env.get(cloudsdk_env)),
        (f"{path} ({in_file})", from_file),
        (f"gcloud config {gcloud_key}", lambda: gcloud.get(gcloud_key)),
        ("the endpoint's defaults", lambda: fallback().get(key)),
    ]
    if flag is not None and not flag.strip():  # `--zone ""`: never a silent default
        raise UsageError(
            f"invalid --{key} {flag!r}: empty; give {_EXAMPLE[key]}, or leave --{key} out "
            "for the default"
        )
    looked: list[str] = []
    for source, get in chain:
        value = get()
        if value:
            where = source.split(" (", 1)[0]
            if isinstance(value, list) and key == "zone":  # `zones` in the config file
                zones = [check_shape(key, z, where) for z in dict.fromkeys(value)]
                return (zones if many else zones[:1]), source, looked
            if not isinstance(value, str):  # the config file is TOML: a list, a number
                raise ConfigError(
                    f"{key} = {value!r} in {path}: expected a string, {_EXAMPLE[key]}"
                )
            if key == "zone" and where == "--zone" and "," in value:
                if not many:
                    raise UsageError(
                        f"invalid --zone {value!r}: this command works in one zone",
                        hint="zones to try in order (a,b) are for `tpuctl run` and `tpuctl create`",
                    )
                return split_zones(value, where), source, looked
            return [check_shape(key, value, where)], source, looked
        looked.append(source)
    return [], "", looked


def resolve_target(
    project: str | None = None,
    zone: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    endpoint_defaults: Callable[[], Mapping[str, str]] = dict,
    need_zone: bool = True,
    many_zones: bool = False,
) -> Target:
    """Project and zone through the whole chain; a one-line ConfigError names where it looked.

    `many_zones`: the command fails over, so --zone may list zones (`a,b`) and the config
    file's `zones` is taken whole; `Target.zones` holds them."""
    env = os.environ if env is None else env
    file_cfg = load_config_file(env)
    gcloud = gcloud_properties(env)
    ps, p_src, p_looked = _lookup("project", project, env, file_cfg, gcloud, endpoint_defaults)
    if not ps:
        try:  # is the zone missing too? (said in the same message: NotSetUp.missing)
            has_zone = bool(_lookup("zone", zone, env, file_cfg, gcloud, endpoint_defaults)[0])
        except (ConfigError, UsageError):
            has_zone = True  # there is one, if a bad one: its own error comes in turn
        raise NotSetUp(
            "no project set; looked at " + ", ".join(p_looked),
            hint="pass --project P, or run `gcloud config set project P`",
            missing=("project",) if has_zone or not need_zone else ("project", "zone"),
        )
    zs, z_src, z_looked = _lookup(
        "zone", zone, env, for_project(file_cfg, ps[0]), gcloud, endpoint_defaults, many=many_zones
    )
    if not zs:
        if need_zone:
            raise NotSetUp(
                "no zone set; looked at " + ", ".join(z_looked),
                hint="pass --zone Z (e.g. us-central1-a), "
                "or run `gcloud config set compute/zone Z`",
                missing=("zone",),
            )
        zs, z_src = ["-"], "all zones"
    zones = tuple(zs) if len(zs) > 1 else ()
    return Target(ps[0], zs[0], project_source=p_src, zone_source=z_src, zones=zones)


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
