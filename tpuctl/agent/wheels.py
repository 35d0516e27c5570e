"""Wheels installed into a venv without pip: `install(venv, wheels)`.

The environment's wheels were built for this VM's Python and platform (its key says so)
and checked against their sha256 before they get here, so what is left of an install is
what the wheel format says (PEP 427, the binary distribution format spec): unpack the
archive into site-packages, move each `<name>.data/<scheme>/` tree to that scheme's
folder, rewrite `#!python` in its scripts, write the console and GUI scripts of
`entry_points.txt`, and record the files (`RECORD`, `INSTALLER`) so that the venv's own
tools see an ordinary install. No resolver, no index, no process: pip would start an
interpreter per venv and resolve again what the index already pins. Modules are not
byte-compiled ahead (uv does not either unless asked: `--compile-bytecode`); the first
import writes each module's `.pyc` into the venv, for that module only.

https://packaging.python.org/en/latest/specifications/binary-distribution-format/
https://packaging.python.org/en/latest/specifications/entry-points/
https://packaging.python.org/en/latest/specifications/recording-installed-packages/

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import configparser
import csv
import os
import posixpath
import re
import shutil
import stat
import sys
import sysconfig
import venv as venvs
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SCHEMES = ("purelib", "platlib", "scripts", "data", "headers")
INSTALLER = "tpuctl"
THREADS = 4  # wheels unpacked at once (zlib and the writes leave the GIL)
# `name = module:attr.sub [extra]` (the entry-points spec above)
ENTRY = re.compile(r"^(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+))?\s*(\[[^\]]*\])?\s*$")


class BadWheel(Exception):
    """A wheel that cannot be installed as it is (one line: the file and why)."""


def create(venv: Path, python: str, system_site_packages: bool) -> None:
    """An empty venv at `venv` (no pip) for `python`: made here when it is this very
    interpreter (no process to start), else by `python -m venv`."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        venvs.EnvBuilder(system_site_packages=system_site_packages, symlinks=True).create(str(venv))
        return
    import subprocess

    flags = ["--system-site-packages"] if system_site_packages else []
    command = [python, "-m", "venv", "--without-pip", *flags, str(venv)]
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )


def scheme(venv: Path) -> dict[str, Path]:
    """Where each part of a wheel goes in `venv` (the venv made by this Python)."""
    base = str(venv)
    # Python 3.11+ names the scheme of its venvs ("venv": distributions patch the default
    # one, as Debian's posix_local, but not that); before it, a venv is posix_prefix.
    names = sysconfig.get_scheme_names()
    paths = sysconfig.get_paths(
        scheme="venv" if "venv" in names else "posix_prefix",
        vars={"base": base, "platbase": base, "installed_base": base, "installed_platbase": base},
    )
    found = {k: Path(paths[k]) for k in ("purelib", "platlib", "scripts", "data")}
    found["headers"] = Path(paths["include"]).parent / "site" / Path(paths["include"]).name
    return found


def install(venv: Path, wheels: list[Path]) -> None:
    """Every wheel of `wheels` into `venv`, a few at once."""
    where = scheme(venv)
    python = str(venv / "bin" / "python")
    if len(wheels) <= 1:
        for wheel in wheels:
            install_one(wheel, where, python)
        return
    with ThreadPoolExecutor(max_workers=min(THREADS, len(wheels))) as pool:
        for done in [pool.submit(install_one, w, where, python) for w in wheels]:
            done.result()


def install_one(wheel: Path, where: dict[str, Path], python: str) -> None:
    """One wheel into the folders of `where`; `python`: the venv's, for the scripts."""
    with zipfile.ZipFile(str(wheel)) as archive:
        names = [i.filename for i in archive.infolist() if not i.filename.endswith("/")]
        info_dir = dist_info(wheel, names)
        data_dir = info_dir[: -len(".dist-info")] + ".data"
        meta = archive.read(f"{info_dir}/WHEEL").decode("utf-8")
        pure = re.search(r"^Root-Is-Purelib:\s*true\s*$", meta, re.M | re.I) is not None
        root = where["purelib" if pure else "platlib"]
        # headers go in a folder of the project's own, as pip puts them
        where = dict(where, headers=where["headers"] / info_dir.split("-", 1)[0])
        record_name = f"{info_dir}/RECORD"
        hashes = recorded(archive, record_name)
        written: list[tuple] = []  # (installed path, hash field, size field)
        for item in archive.infolist():
            name = item.filename
            if name.endswith("/") or name == record_name:
                continue
            target, kind = destination(wheel, name, data_dir, root, where)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(item) as source, open(str(target), "wb") as out:
                if kind == "scripts":
                    first = source.readline()
                    if first.startswith(b"#!python"):  # the spec's marker: the whole line
                        first = b"#!" + python.encode() + b"\n"  # is this venv's python (pip)
                        hashes[name] = ("", "")
                    out.write(first)
                shutil.copyfileobj(source, out, 1 << 20)
            mode = item.external_attr >> 16  # executable as the archive says (as pip does)
            if stat.S_ISREG(mode) and mode & 0o111:
                os.chmod(str(target), 0o755)
            written.append((target, *hashes.get(name, ("", ""))))
        for target in entry_scripts(archive, info_dir, where["scripts"], python):
            written.append((target, "", ""))
    info = root / info_dir
    (info / "INSTALLER").write_text(INSTALLER + "\n")
    written.append((info / "INSTALLER", "", ""))
    rows = [(_relative(p, root), h, s) for p, h, s in written]
    rows.append((_relative(info / "RECORD", root), "", ""))
    with open(str(info / "RECORD"), "w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows(rows)


def dist_info(wheel: Path, names: list[str]) -> str:
    """The wheel's one `<name>-<version>.dist-info` folder at its root."""
    found = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(found) != 1:
        raise BadWheel(f"{wheel.name}: not a wheel: {len(found)} .dist-info folders at its root")
    return found.pop()


def recorded(archive: zipfile.ZipFile, record_name: str) -> dict[str, tuple]:
    """The wheel's RECORD: each file's hash and size, as the wheel says them."""
    try:
        text = archive.read(record_name).decode("utf-8")
    except KeyError:
        return {}
    return {row[0]: (row[1], row[2]) for row in csv.reader(text.splitlines()) if len(row) == 3}


def destination(wheel: Path, name: str, data_dir: str, root: Path, where: dict[str, Path]):
    """Where archive member `name` goes, and its scheme ("" for the root)."""
    clean = posixpath.normpath(name)
    if clean.startswith(("/", "../")) or clean == "..":  # outside it (pip refuses them too)
        raise BadWheel(f"{wheel.name}: a file outside the install: {name}")
    if clean.startswith(data_dir + "/"):
        kind, _, rest = clean[len(data_dir) + 1 :].partition("/")
        if kind not in SCHEMES or not rest:
            raise BadWheel(f"{wheel.name}: {name}: {data_dir}/ holds only {', '.join(SCHEMES)}")
        return where[kind] / rest, kind
    return root / clean, ""


def entry_scripts(
    archive: zipfile.ZipFile, info_dir: str, scripts: Path, python: str
) -> list[Path]:
    """The console and GUI scripts `entry_points.txt` names, written into `scripts`."""
    try:
        text = archive.read(f"{info_dir}/entry_points.txt").decode("utf-8")
    except KeyError:
        return []
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    parser.read_string(text)
    made = []
    for section in ("console_scripts", "gui_scripts"):
        if not parser.has_section(section):
            continue
        for name, value in parser.items(section):
            found = ENTRY.match(value.strip())
            if not found or not found.group("attr") or "/" in name:
                raise BadWheel(f"{info_dir}: entry point {name} = {value}: not module:attr")
            module, attr = found.group("module"), found.group("attr")
            head = attr.split(".")[0]
            scripts.mkdir(parents=True, exist_ok=True)
            path = scripts / name
            path.write_text(
                f"#!{python}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                f"from {module} import {head}\n"
                "if __name__ == '__main__':\n"
                "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                f"    sys.exit({attr}())\n"
            )
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            made.append(path)
    return made


def _relative(path: Path, root: Path) -> str:
    """A RECORD path: relative to site-packages (`../../../bin/x` for a script)."""
    return os.path.relpath(str(path), str(root)).replace(os.sep, "/")
