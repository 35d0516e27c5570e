"""Write the generated section of docs/commands.md from the CLI itself: every command's
usage line and one-line summary, as `tpuctl COMMAND --help` prints them, between the
markers below. The rest of the page is written by hand.

    python scripts/commands_reference.py           # rewrite the section
    python scripts/commands_reference.py --check   # exit 1 when the page differs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from click import Command, Context  # noqa: E402

from tpuctl.cli import make_app  # noqa: E402
from tpuctl.cli.declare import get_command  # noqa: E402

PAGE = ROOT / "docs" / "commands.md"
COMMAND = "python scripts/commands_reference.py"
BEGIN = "<!-- generated: scripts/commands_reference.py -->"
END = "<!-- end generated -->"
WIDTH = 200  # wide enough that no usage line wraps, whatever the terminal


def commands() -> Iterator[tuple[str, str]]:
    """(usage, summary) of every visible command, groups before their subcommands, in
    the order `tpuctl --help` lists them."""
    root = get_command(make_app())
    ctx = Context(root, info_name="tpuctl", terminal_width=WIDTH, max_content_width=WIDTH)
    yield from _walk(root, ctx)


def _walk(group: Command, ctx: Context) -> Iterator[tuple[str, str]]:
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        if command is None or command.hidden:
            continue
        sub = Context(command, info_name=name, parent=ctx)
        usage = command.get_usage(sub).strip().removeprefix("Usage:").strip()
        yield usage, command.get_short_help_str(limit=WIDTH)
        if hasattr(command, "list_commands"):
            yield from _walk(command, sub)


def section() -> str:
    lines = [BEGIN, f"<!-- do not edit: run `{COMMAND}` -->", ""]
    lines += [f"- `{usage}`: {summary}" for usage, summary in commands()]
    return "\n".join([*lines, "", END])


def render(page: str) -> str:
    """The page with its generated section made now."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + section() + page[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args()
    page = PAGE.read_text()
    new = render(page)
    if args.check:
        if new != page:
            print(f"{PAGE.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
