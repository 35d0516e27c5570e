"""`tpuctl --help` from a copy of the last one printed, without loading the command line.

Building the help means importing click and every command's module and making the
command tree: about 0.1 s, four times Python's own start-up, every time a user asks what
tpuctl can do. The text depends only on tpuctl's code, click's and the terminal's width,
so the first `tpuctl --help` keeps what it printed in the state dir, under a key made of
those (the size and modification time of every module of tpuctl and of click's
`__init__.py`, the width, Python's version), and the next ones print it back when the key
matches. Anything else (another width, an edited or upgraded module, an unreadable file)
builds the help as before. Only the top level is kept: `tpuctl CMD --help` always runs.

Standard library only, and nothing of tpuctl's command line is imported here.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

FILE = "help.txt"
ASKS: tuple[list[str], ...] = (["--help"], ["-h"], [])  # `tpuctl` alone prints the same help


def wanted(args: list[str], env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether `args` ask for the top-level help (and no shell completion is under way)."""
    return args in ASKS and not any(k.startswith("_TPUCTL_COMPLETE") for k in env)


def _state_dir(env: dict[str, str] | os._Environ[str]) -> Path:
    """tpuctl's state dir, found as `tpuctl.config.state_dir` finds it (which costs 20 ms
    of imports to load)."""
    if env.get("TPUCTL_STATE_DIR"):
        return Path(env["TPUCTL_STATE_DIR"]).expanduser()
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]) / "tpuctl"
    return Path(env.get("HOME") or Path.home()) / ".local/state/tpuctl"


def _columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` finds it (COLUMNS, then the
    terminal of stdout, else 80), which click and rich follow; without importing shutil
    (3 ms, with the compression modules it loads)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def key() -> str:
    """What the help text depends on, in one line."""
    import tpuctl

    stats = []
    root = Path(tpuctl.__file__).parent
    for where, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(where, name))
                stats.append(f"{where}/{name}:{st.st_mtime_ns}:{st.st_size}")
    for entry in sys.path:  # click's own code, where `import click` will find it
        init = os.path.join(entry or ".", "click", "__init__.py")
        if os.path.isfile(init):
            st = os.stat(init)
            stats.append(f"{init}:{st.st_mtime_ns}:{st.st_size}")
            break
    listing = "\n".join(stats).encode()
    width = _columns()
    return (
        f"tpuctl {tpuctl.__version__} python {sys.version_info[:3]} width {width} "
        f"code {len(stats)}:{zlib.crc32(listing):08x}"
    )


def cached(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """The help kept under the current key, or None."""
    try:
        text = (_state_dir(env) / FILE).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    first, _, help_text = text.partition("\n")
    return help_text if first == key() and help_text else None


def record(run: Callable[[], int], env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """Run the command line (`run`, which prints the help), print what it printed, and keep
    it when it succeeded; `run`'s exit status."""
    import io

    real, captured = sys.stdout, io.StringIO()
    sys.stdout = captured
    try:
        code = run()
    finally:
        sys.stdout = real
        real.write(captured.getvalue())
    text = captured.getvalue()
    if code == 0 and text:
        _keep(_state_dir(env), f"{key()}\n{text}")
    return code


def _keep(where: Path, content: str) -> None:
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{FILE}.{os.getpid()}"
        tmp.write_text(content)
        os.replace(tmp, where / FILE)
    except OSError:
        pass  # a read-only state dir: the help is built each time, as before
