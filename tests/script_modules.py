"""A script of the repository (scripts/, bench/) loaded as a module, for the tests that
call its functions: scripts are files to run, not a package to import."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load(relative: str) -> ModuleType:
    """The module of the script at `relative` (e.g. "scripts/emulator_reference.py")."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
