"""`make docs-images`: terminal captures of tpuctl for the README and docs/, made from
real runs against a fresh emulator, so they never drift from what tpuctl prints.

Each capture runs one tpuctl command with colours forced on (as on a terminal), reads
its output (stderr then stdout, as a terminal would show them interleaved for these
short commands) and writes it as an SVG with rich's own exporter. Talks only to an
emulator it starts on 127.0.0.1 and stops at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT))

from tpuctl.emulator.core.ports import free_port  # noqa: E402

WIDTH = 100
DROP = "TPUCTL_EMULATOR_HOST"  # the captures' own emulator, never another one


def main() -> int:
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
            "COLUMNS": str(WIDTH),
            "LOGNAME": "ada",  # the owner label the captures show
            "USER": "ada",
        }

        def tpuctl(*args: str) -> str:
            r = subprocess.run(
                [sys.executable, "-m", "tpuctl", *args],
                env=env,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=300,
                check=False,
            )
            return r.stderr + r.stdout

        def capture(name: str, title: str, *args: str) -> None:
            with open(os.devnull, "w") as sink:
                console = Console(record=True, width=WIDTH, force_terminal=True, file=sink)
                console.print(Text(f"$ tpuctl {' '.join(args)}", style="bold"))
                console.print(Text.from_ansi(tpuctl(*args).rstrip()))
            OUT.mkdir(parents=True, exist_ok=True)
            console.save_svg(str(OUT / f"{name}.svg"), title=title)
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
            capture("list", "tpuctl list", "list", "--all-zones")
            capture("gc", "tpuctl gc --dry-run", "gc", "--dry-run")
            capture("quota", "tpuctl quota", "quota", "--zone", "us-central1-a")
            tpuctl("delete", "exp-small", "old", "--yes")
            tpuctl("delete", "pod", "--zone", "us-central2-b", "--yes")
        finally:
            tpuctl("emulator", "stop", "--state-dir", state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
