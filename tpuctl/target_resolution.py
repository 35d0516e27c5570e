"""Where project and zone come from: `resolve_target`.

Order (first hit wins): command flags; TPUCTL_PROJECT / TPUCTL_ZONE; gcloud's own
environment overrides (CLOUDSDK_CORE_PROJECT / CLOUDSDK_COMPUTE_ZONE); tpuctl's
config file ($TPUCTL_CONFIG or ~/.config/tpuctl/config.toml); the active gcloud
configuration, read as a file; last, defaults offered by the endpoint in use
(the local emulator offers a demo project and zone, the cloud offers none).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tpuctl.config import (
    NotSetUp,
    Target,
    check_shape,
    config_file_path,
    for_project,
    gcloud_properties,
    load_config_file,
    split_zones,
)
from tpuctl.errors import ConfigError, UsageError

_EXAMPLE = {"project": "a project id like my-project", "zone": "a zone like us-central1-a"}


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
