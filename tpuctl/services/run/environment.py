"""A job's Python environment, on the laptop's side: the requirement set read from the
file the user named (a requirements file, a pip-compiled lock file, a `pyproject.toml`'s
dependencies or a `uv.lock`), or the work dir's requirements.txt by default, into the
request's `environment`; and, at the end, what the workers' statuses say of it. The
agents build and install it (tpuctl/agent/envs.py, docs/environments.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tpuctl import wording
from tpuctl.agent import envkeys
from tpuctl.errors import UsageError

DEFAULT_FILE = "requirements.txt"


def spec_of(
    requirements: Path | None,
    no_requirements: bool,
    workdir: Path,
    rebuild: bool = False,
    system_site_packages: bool = False,
) -> tuple[dict[str, Any] | None, bool]:
    """(the request's `environment`, or None; whether it is the work dir's default file)."""
    if requirements is not None and no_requirements:
        raise UsageError("--requirements and --no-requirements are exclusive: choose one")
    default = requirements is None
    path = workdir / DEFAULT_FILE if default else requirements
    if no_requirements or path is None or (default and not path.is_file()):
        for flag, given in (
            ("--rebuild-env", rebuild),
            ("--system-site-packages", system_site_packages),
        ):
            if given:
                raise UsageError(f"{flag} needs requirements: give --requirements FILE")
        return None, False
    flag = f"the work dir's {DEFAULT_FILE}" if default else f"--requirements {requirements}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--requirements {requirements}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {flag}: {getattr(e, 'strerror', None) or e}") from None
    try:
        lines = lines_of(path.name, text)
    except (envkeys.BadRequirements, ValueError) as e:
        raise UsageError(f"{flag}: {e}") from None
    if not lines:
        raise UsageError(f"{flag} lists no requirement", hint="--no-requirements runs without one")
    spec = {
        "requirements": "".join(line + "\n" for line in lines),
        "source": path.name,
        "system_site_packages": system_site_packages,
        "rebuild": rebuild,
    }
    return spec, default


def lines_of(name: str, text: str) -> list[str]:
    """The requirement set of a file, by its kind (its name)."""
    if name == "pyproject.toml" or name.endswith(".lock"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"not valid TOML: {e}") from None
        if name == "pyproject.toml":
            deps = (data.get("project") or {}).get("dependencies") or []
            return envkeys.requirement_lines("\n".join(str(d) for d in deps))
        pins = []
        for package in data.get("package") or []:
            source = package.get("source") or {}
            if "editable" in source or "virtual" in source or "directory" in source:
                continue  # the project itself: its code ships as the job's code
            pins.append(f"{package['name']}=={package['version']}")
        return envkeys.requirement_lines("\n".join(pins))
    return envkeys.requirement_lines(text)


def summary(statuses: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """What the workers' statuses say of the environment: its key, how each worker got it
    (built, from the bucket, reused), the bytes moved and the slowest worker's time. A
    status is anyone's to write (the bucket is shared): a field of the wrong type counts
    as absent."""
    made = {
        w: s["environment"] for w, s in statuses.items() if isinstance(s.get("environment"), dict)
    }
    if not made:
        return None
    how: dict[str, int] = {}
    for env in made.values():
        how[_text(env.get("how"), "?")] = how.get(_text(env.get("how"), "?"), 0) + 1
    packages: list[Any] = next(
        (e["packages"] for e in made.values() if isinstance(e.get("packages"), list)), []
    )
    built = [w for w, e in made.items() if e.get("how") == "built"]
    cached = [e for e in made.values() if e.get("how") == "cached"]
    slowest: dict[str, Any] = max(cached, key=lambda e: _number(e.get("seconds")), default={})
    return {
        "key": _text(next(iter(made.values())).get("key"), ""),
        "workers": how,
        "builtBy": built[0] if built else None,
        "packages": len(packages),
        "bytes": int(sum(_number(e.get("bytes")) for e in made.values())),
        "seconds": max(_number(e.get("seconds")) for e in made.values()),
        # the CPU the workers' environment steps used, all added up (their own clocks)
        "cpuSeconds": round(sum(_number(e.get("cpu")) for e in made.values()), 3),
        "phases": _phases(made[built[0]].get("phases")) if built else {},
        # of the slowest to install from the bucket
        "cachedPhases": _phases(slowest.get("phases")),
    }


def _number(value: Any) -> float:
    """A status's number, 0 where it holds anything else."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value == value
    return float(value) if ok and abs(value) < 1e15 else 0.0


def _text(value: Any, default: str) -> str:
    return value[:200] if isinstance(value, str) else default


def _phases(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k)[:40]: _number(v) for k, v in list(value.items())[:20]}


def describe(env: dict[str, Any]) -> str:
    """One line for the end of `run`."""
    names = {"built": "built on", "cached": "from the bucket on", "reused": "reused on"}
    parts = [f"{names.get(k, k)} {n} worker(s)" for k, n in sorted(env["workers"].items())]
    order = ("resolve", "upload", "fetch", "install")
    phases = ", ".join(f"{k} {env['phases'][k]:.1f}s" for k in order if k in env["phases"])
    fetched = env.get("cachedPhases") or {}
    fetching = ", ".join(f"{k} {fetched[k]:.1f}s" for k in order if k in fetched)
    said = "; ".join(
        ([f"build: {phases}"] if phases else [])
        + ([f"slowest from the bucket: {fetching}"] if fetching else [])
    )
    return (
        f"environment {env['key'][:12]}: {env['packages']} "
        + ("package, " if env["packages"] == 1 else "packages, ")
        + ", ".join(parts)
        + f"; {wording.size(env['bytes'])} moved; ready in {env['seconds']:.1f}s"
        + (f" ({said})" if said else "")
    )
