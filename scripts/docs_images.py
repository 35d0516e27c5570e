"""`make docs-images`: terminal captures of tpuctl for the README and docs/, made from
real runs against a fresh emulator, so they never drift from what tpuctl prints.

Each capture runs one tpuctl command with colours forced on (as on a terminal), reads
its output (stderr and stdout through one pipe, in the order they were written) and
writes it as an SVG with rich's own exporter. Talks only to an
emulator it starts on 127.0.0.1 and stops at the end.

To keep the images small: a spinner's frames collapse to its last one per label (what
the terminal showed last), and the SVG drops rich's web-font declarations (an SVG shown
through <img>, as GitHub does, loads no external font), its per-line clip paths, the
indentation and blank lines of its markup, and writes each no-break space as the character
itself instead of `&#160;` (the same document to an XML parser). Its ids are the capture's
name instead of a hash (an SVG shown through <img> shares no ids with the page).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.core.ports import free_port  # noqa: E402

WIDTH = 100
LIST_WIDTH = 136  # a wide terminal: a row of list, owner and all, on one line
DROP = "TPUCTL_EMULATOR_HOST"  # the captures' own emulator, never another one
SPINNER = re.compile(r"^(?:\x1b\[[0-9;?]*[A-Za-z])*[\u2800-\u28ff](?:\x1b\[[0-9;]*m)* ([^:]*)")
FONT_FACES = re.compile(r"\s*@font-face \{\{.*?\}\}", re.S)
LINE_CLIPS = re.compile(
    r'<clipPath id="[^"]*-line-\d+">.*?</clipPath>\s*|\sclip-path="url\(#[^)]*-line-\d+\)"', re.S
)


def collapse_spinners(output: str) -> str:
    """Each run of a spinner's frames (same label) down to its last frame."""
    kept: list[str] = []
    label = None
    for line in output.splitlines():
        m = SPINNER.match(line)
        if m and m.group(1) == label and kept:
            kept[-1] = line
        else:
            kept.append(line)
        label = m.group(1) if m else None
    return "\n".join(kept)


NEWLINES = re.compile(r"<text [^>]*>\n</text>")  # rich draws each line's newline too
LAYOUT = re.compile(r" *\n[ \n]*")  # markup's indentation, trailing spaces, blank lines


def small_svg(svg: str) -> str:
    svg = NEWLINES.sub("", LINE_CLIPS.sub("", svg))
    return LAYOUT.sub("\n", svg).replace("&#160;", "\u00a0")


def main() -> int:
    from rich._export_format import CONSOLE_SVG_FORMAT
    from rich.console import Console
    from rich.text import Text

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tpuctl-images.") as tmp:
        env = {
            **{
                k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TPUCTL_EMULATOR_HOST")
            },
            "HOME": tmp,
            "XDG_CONFIG_HOME": f"{tmp}/config",
            "XDG_STATE_HOME": f"{tmp}/state",
            "CLOUDSDK_CONFIG": f"{tmp}/gcloud",
            "TPUCTL_EMULATOR_HOST": f"127.0.0.1:{port}",
            "FORCE_COLOR": "1",
            "PYTHONUNBUFFERED": "1",  # stdout and stderr interleaved as they were written
            "COLUMNS": str(WIDTH),
            "LOGNAME": "ada",  # the owner label the captures show
            "USER": "ada",
        }

        def tpuctl(*args: str, width: int = WIDTH) -> str:
            r = subprocess.run(
                [sys.executable, "-m", "tpuctl", *args],
                env={**env, "COLUMNS": str(width)},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=ROOT,
                timeout=300,
                check=False,
            )
            return collapse_spinners(r.stdout)

        def capture(name: str, title: str, *args: str, width: int = WIDTH) -> None:
            with open(os.devnull, "w") as sink:
                console = Console(record=True, width=width, force_terminal=True, file=sink)
                console.print(Text(f"$ tpuctl {' '.join(args)}", style="bold"))
                console.print(Text.from_ansi(tpuctl(*args, width=width).rstrip()))
            OUT.mkdir(parents=True, exist_ok=True)
            svg = console.export_svg(
                title=title, code_format=FONT_FACES.sub("", CONSOLE_SVG_FORMAT), unique_id=name
            )
            (OUT / f"{name}.svg").write_text(small_svg(svg), encoding="utf-8")
            print(f"wrote docs/images/{name}.svg", file=sys.stderr)

        state = f"{tmp}/emulator"
        tpuctl("emulator", "start", "--detach", "--port", str(port), "--state-dir", state)
        try:
            capture(
                "run",
                "tpuctl run",
                "run",
                "examples/train.py",
                "-a",
                "v3-8",
                "--",
                "--steps",
                "30",
                "--sleep",
                "0.02",
            )
            tpuctl("create", "exp-small", "-a", "v3-8", "--ttl", "8h")
            tpuctl("create", "pod", "-a", "v4-32", "--zone", "us-central2-b", "--spot")
            tpuctl("create", "old", "-a", "v3-8", "--ttl", "1s")
            capture("list", "tpuctl list", "list", "--all-zones", width=LIST_WIDTH)
            capture("gc", "tpuctl gc --dry-run", "gc", "--dry-run")
            capture("quota", "tpuctl quota", "quota", "--zone", "us-central1-a")
            tpuctl("delete", "exp-small", "old", "--yes")
            tpuctl("delete", "pod", "--zone", "us-central2-b", "--yes")
        finally:
            tpuctl("emulator", "stop", "--state-dir", state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
