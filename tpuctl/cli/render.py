"""Output: data on stdout (tables or JSON), progress and messages on stderr."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tpuctl.cli import declare
from tpuctl.durations import format_duration

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


# rich is imported when something is printed, not when tpuctl starts (`--help` stays fast).


def escape(text: str) -> str:
    """`text` with rich's markup characters escaped, and what a terminal would act on
    (control characters, bidirectional overrides) written as escapes."""
    from rich.markup import escape as rich_escape

    from tpuctl.wording import printable

    return rich_escape(printable(text))


def new_table(**options: Any) -> Table:
    from rich.table import Table

    return Table(**options)


def _styles() -> Literal["auto"] | None:
    """Rich's colour system; None (no escape sequence at all, bold included) under NO_COLOR
    (https://no-color.org: set and not empty). Without a terminal rich writes none anyway."""
    return None if os.environ.get("NO_COLOR") else "auto"


def out() -> Console:
    # Piped output is for grep and scripts: never truncate a table to 80 columns there.
    from rich.console import Console

    return Console(
        file=sys.stdout,
        soft_wrap=True,
        width=None if sys.stdout.isatty() else 400,
        color_system=_styles(),
    )


def err() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, soft_wrap=True, color_system=_styles())


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)


def show(renderable: Any, console: Console | None = None) -> None:
    """Print a table (or any rich renderable) without the spaces rich pads lines with."""
    console = console or out()
    with console.capture() as captured:
        console.print(renderable)
    console.file.write(_TRAILING.sub(r"\1", captured.get()))
    console.file.flush()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def info(message: str) -> None:
    err().print(escape(message), highlight=False)


def confirm(question: str, default: bool) -> bool:
    """A yes/no question, all of it on stderr, the answer read from stdin.

    Not `declare.confirm(err=True)`: click writes the prompt's last character with
    `input()`, which goes to stdout, so a stdout redirected to a file or a pipe (`--json`,
    a plan kept by `tpuctl gc > plan.txt`) would get a stray space. Ctrl-C or the end of
    stdin aborts, as click's does."""
    suffix = " [Y/n]: " if default else " [y/N]: "
    while True:
        sys.stderr.write(question + suffix)
        sys.stderr.flush()
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            raise declare.Abort() from None
        if not line:
            raise declare.Abort()
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        if not answer:
            return default
        sys.stderr.write("Error: invalid input\n")


def human_age(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


HEARTBEAT = 30.0  # seconds between lines while a wait without a terminal shows no change


@contextmanager
def progress(label: str) -> Iterator[Callable[[str, float], None]]:
    """A spinner on stderr showing `label`, the cloud state and time waited.

    On a terminal it animates; otherwise it prints one line per state change,
    so CI logs show progress without control characters.
    """
    console = err()
    if console.is_terminal:
        with console.status(escape(label)) as status:

            def update(state: str, elapsed: float) -> None:
                status.update(f"{escape(label)} [bold]{escape(state)}[/] ({human_age(elapsed)})")

            yield update
        return

    seen: set[str] = set()
    last_line = [time.monotonic()]

    def plain(state: str, elapsed: float) -> None:
        # One line per new state (several nodes may report in turn: each state once), and
        # a heartbeat while nothing changes, so a log shows the wait is alive.
        now = time.monotonic()
        if state in seen and now - last_line[0] < HEARTBEAT:
            return
        still = " still" if state in seen else ""
        seen.add(state)
        last_line[0] = now
        console.print(
            f"{escape(label)}{still} {escape(state)} ({human_age(elapsed)})", highlight=False
        )

    yield plain


@dataclass(frozen=True)
class Col:
    """A column of a list: `drop` orders what goes first when the terminal is narrow (0:
    never dropped); an identifier (`ident`) is never cut, since it is what users paste
    into the next command."""

    header: str
    drop: int = 0
    ident: bool = False
    right: bool = False
    fold: bool = False  # free text that may wrap instead of being dropped


GAP = 2  # columns between two cells of a table without a box (padding 1 each side)


def fitted(cols: list[Col], rows: list[list[str]], width: int | None, wide: bool = False) -> Table:
    """A table of `rows` (plain text, escaped here) in `width` columns: with every column
    when it fits or `wide`, else without the lowest-value columns, dropped one at a time
    (highest `drop` first) until it fits. Identifiers keep their full width whatever
    happens; a line longer than the terminal wraps rather than cut one."""
    return fit(cols, rows, width, wide)[0]


def fit(
    cols: list[Col], rows: list[list[str]], width: int | None, wide: bool = False
) -> tuple[Table, list[str]]:
    """`fitted`'s table, and the headers of the columns it left out. On a terminal
    (`width`, not `wide`), a column with nothing in any row goes too, unsaid: it hid
    nothing."""
    from rich.cells import cell_len

    def natural(i: int) -> int:
        return max([cell_len(cols[i].header), *(cell_len(r[i]) for r in rows)])

    empty = {
        i
        for i, c in enumerate(cols)
        if not c.ident and rows and not any(r[i].strip() for r in rows)
    }
    shown = [i for i in range(len(cols)) if not (width and not wide and i in empty)]
    needed = {i: natural(i) for i in shown}

    def total() -> int:
        return sum(needed[i] for i in shown if not cols[i].fold) + GAP * (len(shown) - 1)

    if not wide and width:
        droppable = sorted((i for i in shown if cols[i].drop), key=lambda i: -cols[i].drop)
        for i in droppable:
            if total() <= width:
                break
            shown.remove(i)
    # Still too wide (long names): the other columns fold onto more lines, never cut.
    squeezed = bool(width) and not wide and total() > (width or 0)
    table = new_table(box=None, header_style="bold", pad_edge=False)
    for i in shown:
        col = cols[i]
        table.add_column(
            col.header,
            no_wrap=col.ident or not (col.fold or squeezed),
            overflow="fold",
            justify="right" if col.right else "left",
            min_width=needed[i] if col.ident else None,
        )
    for row in rows:
        table.add_row(*(escape(row[i]) for i in shown))
    return table, [c.header for i, c in enumerate(cols) if i not in shown and i not in empty]


def table_width(console: Console, wide: bool) -> int | None:
    """The columns a table may take: the terminal's (None when piped: never cut)."""
    return None if wide or not console.is_terminal else console.width


def show_fitted(cols: list[Col], rows: list[list[str]], wide: bool = False) -> None:
    """Print a list fitted to the terminal (everything with `wide`, lines wrapping)."""
    console = out()
    width = table_width(console, wide)
    table, hidden = fit(cols, rows, width, wide)
    if wide and console.is_terminal:
        console.width = max(console.width, 400)  # nothing cut: the terminal wraps the lines
    show(table, console)
    if hidden and rows:  # said, never left out in silence (on stderr: stdout is the table)
        info(hidden_line(hidden, "--wide shows all"))


def hidden_line(hidden: list[str], how: str) -> str:
    """What a table fitted to the terminal left out, and how to see it."""
    return f"hidden: {', '.join(hidden)}; {how}"


class StderrUi:
    """What a use case tells the user as it goes: lines and spinners on stderr."""

    def info(self, message: str) -> None:
        info(message)

    def progress(self, label: str) -> AbstractContextManager[Callable[[str, float], None]]:
        return progress(label)


def print_format(rows: list[Any], fmt: str) -> None:
    """Rows in a gcloud --format (json, yaml, value(...), table(...), csv(...))."""
    from tpuctl.cli import projection

    sys.stdout.write(projection.render(rows, projection.parse_format(fmt)))
    sys.stdout.flush()
