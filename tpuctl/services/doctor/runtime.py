"""Section 2 of `tpuctl doctor`: the frameworks a script imports against the runtime
version (the VM image) it will run on, and what the job's environment and `--setup` install.

The pairs (which image carries which framework) are the catalogue's
(`tpuctl/frameworks.py`, with their sources). Findings are warnings: tpuctl cannot see
everything that may install software on the VM (a script that installs its own, an image
it does not know), so it says what it sees and lets the run go on.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tpuctl import frameworks
from tpuctl.catalog import RUNTIME_GENERATIONS, SliceShape
from tpuctl.services.doctor.findings import Finding
from tpuctl.services.doctor.program import Program

# `tensorflow==2.15`, `jax[tpu]>=0.4`, `torch_xla[tpu]~=2.5.0`: name, extras, version pin
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*(\[[^\]]*\])?\s*(?:(==|~=|>=|<=|>|<|!=)\s*([\w.*]+))?")
_PIP = re.compile(r"\bpip3?\s+install\b|\bpython3?\s+-m\s+pip\s+install\b")


def _name(dist: str) -> str:
    """A pip name as the import name tpuctl knows it (`torch-xla` -> `torch_xla`)."""
    return dist.lower().replace("-", "_")


def _installs(setup: str | None, root: Path) -> dict[str, tuple[str | None, str]]:
    """What `--setup` installs with pip: import name -> (exact or compatible pin or None,
    where it was read). Requirement files named with `-r` are read from the work dir."""
    found: dict[str, tuple[str | None, str]] = {}
    if not setup:
        return found
    for command in re.split(r"&&|\|\||;|\n", setup):
        match = _PIP.search(command)
        if not match:
            continue
        try:
            words = shlex.split(command[match.end() :])
        except ValueError:
            words = command[match.end() :].split()
        specs: list[tuple[str, str]] = []
        for i, word in enumerate(words):
            if word in ("-r", "--requirement") and i + 1 < len(words):
                specs += _requirements(root / words[i + 1])
            elif not word.startswith("-") and (i == 0 or words[i - 1] not in ("-f", "-i")):
                specs.append((word, "--setup"))
        found.update(_pins(specs))
    return found


def _pins(specs: list[tuple[str, str]]) -> dict[str, tuple[str | None, str]]:
    """Requirements (spec, where read) as import name -> (exact or compatible pin or None,
    where); a pip option (`--extra-index-url ...`) names nothing."""
    found: dict[str, tuple[str | None, str]] = {}
    for spec, where in specs:
        m = None if spec.startswith("-") else _SPEC.match(spec)
        if m:
            pin = m.group(4) if m.group(3) in ("==", "~=") else None
            found[_name(m.group(1))] = (pin, where)
    return found


def _listed(environment: dict[str, Any] | None) -> dict[str, tuple[str | None, str]]:
    """What the job's environment installs: the requirement set `run` builds it from
    (services/run/environment.py: the work dir's requirements.txt, or the file given)."""
    if not environment:
        return {}
    where = str(environment.get("source") or "requirements")
    return _pins([(line, where) for line in str(environment["requirements"]).splitlines()])


def _requirements(path: Path) -> list[tuple[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [(line, f"{path.name}:{n}") for n, line in enumerate(lines, 1) if line.strip()]


def _import_line(program: Program, name: str) -> tuple[str, int]:
    """Where the script (or a module of the work dir) first imports `name`."""
    import ast

    for module in program.modules:
        for node in ast.walk(module.tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            if any(n == name or n.startswith(name + ".") for n in names):
                return module.rel, getattr(node, "lineno", 1)
    return program.script.rel, 1


def check(
    program: Program,
    acc: SliceShape | None,
    runtime: str,
    setup: str | None,
    environment: dict[str, Any] | None = None,
) -> Iterator[Finding]:
    """The findings for a program run on `runtime` in its `environment` (the request's:
    a requirement set, or None) after `setup`; nothing for a runtime version the
    catalogue does not know (a custom image: tpuctl cannot tell)."""
    if runtime not in RUNTIME_GENERATIONS:
        return
    carried = frameworks.carried(runtime)
    installs = {**_listed(environment), **_installs(setup, program.root)}
    for name in frameworks.FRAMEWORKS:
        if not program.uses(name):
            continue
        file, line = _import_line(program, name)
        installed = installs.get(name)
        if name not in carried and installed is None:
            source = str(environment.get("source")) if environment else None
            yield _missing(file, line, name, runtime, acc, setup, source)
        elif name == "tensorflow" and installed is not None:
            yield from _tf_pinned(file, line, runtime, acc, carried, installed)


def _missing(
    file: str,
    line: int,
    name: str,
    runtime: str,
    acc: SliceShape | None,
    setup: str | None,
    source: str | None,
) -> Finding:
    said = (
        "no --setup installs it" if not setup else "the --setup given does not visibly install it"
    )
    if source:
        said += f", nor does the job's environment ({source})"
    message = (
        f"the script imports {name}, but the runtime version {runtime} has no {name} and "
        f"{said}: the job stops with ModuleNotFoundError"
    )
    if name == "tensorflow":
        fitting = frameworks.tf_runtime(acc)
        fix = (
            f"run on a TensorFlow image: --version {fitting} (it carries TensorFlow "
            f"{frameworks.carried(fitting)['tensorflow']})"
            if fitting
            else "run on a tpu-vm-tf-* runtime version that fits the accelerator"
        )
    elif source:
        fix = f"list it in {source}, or install it first: --setup '{frameworks.SETUP[name]}'"
    else:
        fix = f"install it first: --setup '{frameworks.SETUP[name]}'"
    return Finding(file, line, "warning", "runtime-no-framework", message, fix)


def _tf_pinned(
    file: str,
    line: int,
    runtime: str,
    acc: SliceShape | None,
    carried: dict[str, str],
    installed: tuple[str | None, str],
) -> Iterator[Finding]:
    pin, where = installed
    have = carried.get("tensorflow")
    if have is not None and (pin is None or frameworks.matches(pin, have)):
        return  # the image's own TensorFlow, or a pin it satisfies
    fitting = frameworks.tf_runtime(acc, pin)
    fits_pin = fitting is not None and pin is not None
    fits_pin = fits_pin and frameworks.matches(
        pin or "", frameworks.carried(fitting or "").get("tensorflow", "")
    )
    if have is not None:
        message = (
            f"{where} installs tensorflow {pin} over the TensorFlow {have} of {runtime}: "
            "the libtpu of the image is built for its own TensorFlow"
        )
    else:
        message = (
            f"{where} installs tensorflow{f' {pin}' if pin else ''} from pip on {runtime}: "
            "the pip package is not the TPU build the tpu-vm-tf-* images carry"
        )
    if fits_pin:
        fix = f"use --version {fitting} (TensorFlow {pin}) and drop tensorflow from the setup"
    elif fitting:
        version = frameworks.carried(fitting)["tensorflow"]
        fix = (
            f"use --version {fitting} (TensorFlow {version}; no image carries {pin or 'that'} "
            "for this accelerator) and drop tensorflow from the setup"
        )
    else:
        fix = "use a tpu-vm-tf-* runtime version and drop tensorflow from the setup"
    yield Finding(file, line, "warning", "runtime-tf-version", message, fix)
