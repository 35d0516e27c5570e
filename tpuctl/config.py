"""Where project and zone come from, and tpuctl's own config file.

Order (first hit wins): command flags; TPUCTL_PROJECT / TPUCTL_ZONE; gcloud's own
environment overrides (CLOUDSDK_CORE_PROJECT / CLOUDSDK_COMPUTE_ZONE); tpuctl's
config file ($TPUCTL_CONFIG or ~/.config/tpuctl/config.toml); the active gcloud
configuration, read as a file; last, defaults offered by the endpoint in use
(the local emulator offers a demo project and zone, the cloud offers none).
"""

from __future__ import annotations

import configparser
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


def check_shape(kind: str, value: str, source: str) -> str:
    """`value` when it has the shape of a `kind` ("project", "zone", "region"); else a
    UsageError when `source` is a flag (`--zone`), a ConfigError naming the source."""
    pattern, rule = _SHAPES[kind]
    if pattern.fullmatch(value):
        return value
    shown = value if len(value) <= 64 else value[:61] + "..."
    if source.startswith("--"):
        raise UsageError(f"invalid {source} {shown!r}: {rule}")
    raise ConfigError(f"invalid {kind} {shown!r} (from {source}): {rule}")


@dataclass(frozen=True)
class Target:
    """The project and zone a command works on, and where each came from."""

    project: str
    zone: str
    project_source: str = ""
    zone_source: str = ""

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}"


def _lookup(
    key: str,
    flag: str | None,
    env: Mapping[str, str],
    file_cfg: Mapping[str, Any],
    gcloud: Mapping[str, str],
    fallback: Callable[[], Mapping[str, str]],
) -> tuple[str | None, str, list[str]]:
    """One value through the chain; returns (value, source, places looked)."""
    tpuctl_env = {"project": "TPUCTL_PROJECT", "zone": "TPUCTL_ZONE"}[key]
    cloudsdk_env = {"project": "CLOUDSDK_CORE_PROJECT", "zone": "CLOUDSDK_COMPUTE_ZONE"}[key]
    gcloud_key = {"project": "core/project", "zone": "compute/zone"}[key]
    chain: list[tuple[str, Callable[[], Any]]] = [
        (f"--{key}", lambda: flag),
        (f"${tpuctl_env}", lambda: env.get(tpuctl_env)),
        (f"${cloudsdk_env}", lambda: env.get(cloudsdk_env)),
        (f"{config_file_path(env)} ({key} = ...)", lambda: file_cfg.get(key)),
        (f"gcloud config {gcloud_key}", lambda: gcloud.get(gcloud_key)),
        ("the endpoint's defaults", lambda: fallback().get(key)),
    ]
    looked: list[str] = []
    for source, get in chain:
        value = get()
        if value:
            if not isinstance(value, str):  # the config file is TOML: a list, a number
                raise ConfigError(
                    f"{key} = {value!r} in {config_file_path(env)}: expected a string, "
                    f"{_EXAMPLE[key]}"
                )
            return check_shape(key, value, source.split(" (", 1)[0]), source, looked
        looked.append(source)
    return None, "", looked


def resolve_target(
    project: str | None = None,
    zone: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    endpoint_defaults: Callable[[], Mapping[str, str]] = dict,
    need_zone: bool = True,
) -> Target:
    """Project and zone through the whole chain; a one-line ConfigError names where it looked."""
    env = os.environ if env is None else env
    file_cfg = load_config_file(env)
    gcloud = gcloud_properties(env)
    p, p_src, p_looked = _lookup("project", project, env, file_cfg, gcloud, endpoint_defaults)
    if not p:
        raise ConfigError(
            "no project set; looked at " + ", ".join(p_looked),
            hint="pass --project P, or run `gcloud config set project P`",
        )
    z, z_src, z_looked = _lookup("zone", zone, env, file_cfg, gcloud, endpoint_defaults)
    if not z:
        if need_zone:
            raise ConfigError(
                "no zone set; looked at " + ", ".join(z_looked),
                hint="pass --zone Z (e.g. us-central1-a), "
                "or run `gcloud config set compute/zone Z`",
            )
        z, z_src = "-", "all zones"
    return Target(project=p, zone=z, project_source=p_src, zone_source=z_src)


def login_name() -> str:
    """The local user's login name, "" when the system cannot say (no passwd entry)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "")


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config_values(values: Mapping[str, str], env: Mapping[str, str] | None = None) -> Path:
    """Set top-level string keys of tpuctl's config file, keeping every other line (other
    keys, tables, comments) as it is; written atomically. Returns the file's path."""
    path = config_file_path(env)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    table = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    head, tail = lines[:table], lines[table:]
    for key, value in values.items():
        line = f"{key} = {_toml_string(value)}"
        pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
        at = next((i for i, ln in enumerate(head) if pattern.match(ln)), None)
        if at is None:
            head.append(line)
        else:
            head[at] = line
    if tail and head and head[-1].strip():
        head.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(head + tail) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
