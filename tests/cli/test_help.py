"""Help that reads well at 80 columns: values named as a CLI names them, never cut."""

from __future__ import annotations

import re

import pytest

from tpuctl.cli import app, main
from tpuctl.cli.declare import get_command

COMMANDS = [
    ["create"], ["list"], ["top"], ["describe"], ["stop"], ["start"], ["delete"], ["keep"],
    ["gc"], ["quota"], ["quota", "request"], ["run"], ["doctor"], ["jobs"], ["logs"],
    ["cancel"], ["outputs"], ["stacks"], ["cost"], ["prices"], ["profile"], ["ssh"], ["exec"],
    ["scp"], ["init"], ["emulator", "start"], ["emulator", "preempt"], ["maintain"],
]  # fmt: skip


def _help(capsys, monkeypatch, args: list[str]) -> str:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main([*args, "--help"]) == 0
    return str(capsys.readouterr().out)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_help_names_values_and_fits_80_columns(capsys, monkeypatch, args) -> None:
    text = _help(capsys, monkeypatch, args)
    assert text.startswith(f"Usage: tpuctl {' '.join(args)} [OPTIONS]")
    # no Python types (`<str>`, `<list[str]>`, `<bool>`), no braces round arguments
    assert not re.search(r"<(str|int|float|bool|list\[[a-z]+\])>", text), text
    assert not re.search(r"\{[A-Za-z_]+\}", text.splitlines()[0]), text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_examples_of_the_names(capsys, monkeypatch) -> None:
    create = _help(capsys, monkeypatch, ["create"])
    assert "Usage: tpuctl create [OPTIONS] [NAME]" in create
    assert "-z, --zone ZONE" in create and "--ttl DURATION" in create
    assert "--labels KEY=VALUE,..." in create and "--spot " in create
    scp = _help(capsys, monkeypatch, ["scp"])
    assert "Usage: tpuctl scp [OPTIONS] PATHS..." in scp


def test_every_command_is_checked() -> None:
    group = get_command(app)
    names = {name for name in group.commands if name not in ("emulator",)}  # type: ignore[attr-defined]
    assert names <= {args[0] for args in COMMANDS}, names - {args[0] for args in COMMANDS}


def _group_lines(text: str) -> list[str]:
    """The `Commands:` section's lines of a group's help."""
    return text.split("Commands:\n", 1)[1].splitlines()


@pytest.mark.parametrize(
    "group", [[], ["quota"], ["emulator"]], ids=lambda g: " ".join(g) or "root"
)
def test_every_summary_is_whole_at_80_columns(capsys, monkeypatch, group) -> None:
    text = _help(capsys, monkeypatch, group)
    command = get_command(app)
    for name in group:
        command = command.commands[name]  # type: ignore[attr-defined]
    lines = _group_lines(text)
    for name, sub in command.commands.items():  # type: ignore[attr-defined]
        first = " ".join((sub.help or "").split("\n\n", 1)[0].split())
        line = next(ln for ln in lines if ln.split()[:1] == [name])
        # one line each, the first paragraph of the command's help as written
        assert line.split(None, 1)[1] == first, (name, line)
    assert "..." not in "\n".join(lines) and "…" not in text


def test_a_narrow_terminal_wraps_summaries_rather_than_cutting_them(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    capsys.readouterr()
    assert main(["--help"]) == 0
    text = str(capsys.readouterr().out)
    assert "..." not in text.split("Commands:", 1)[1]
    assert "Check a script for GPU-to-TPU mistakes, or troubleshoot a node." in " ".join(
        text.split()
    )


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_help_never_breaks_a_word_at_its_hyphens(capsys, monkeypatch, args) -> None:
    text = _help(capsys, monkeypatch, args)
    # a line that ends in `word-` followed by a line that goes on with the word
    assert not re.search(r"\w-\n\s+\w", text), text


def test_the_hyphenated_words_that_used_to_break_stay_whole(capsys, monkeypatch) -> None:
    create = _help(capsys, monkeypatch, ["create"])
    assert "us-central2-b,us-east5-a." in create and "--keep-request." in create


def _options() -> list:  # noqa: ANN401
    root = get_command(app)
    found = []

    def walk(command) -> None:  # noqa: ANN001
        for p in command.params:
            if p.param_type_name == "option":
                found.append((command.name, p))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(root)
    return found


TIME = re.compile(
    r"timeout|interval|every|notice|deadline|ttl|^idle$|older_than|valid_until$|hang_after"
)


def test_every_flag_that_takes_a_time_takes_a_duration() -> None:
    timed = [(c, p) for c, p in _options() if TIME.search(p.name or "") and not p.is_flag]
    assert {p.name for _, p in timed} >= {
        "sync_every", "interval", "connect_timeout", "notice", "ttl", "idle_timeout", "timeout",
        "hang_after",
    }  # fmt: skip
    for command, p in timed:
        assert p.metavar == "DURATION", (command, p.name)
        assert "seconds" not in (p.help or "").lower().split()[:1], (command, p.name, p.help)


@pytest.mark.parametrize(
    ("args", "seconds_seen"),
    [
        (["top", "--interval"], 60.0),
        (["ssh", "n", "--connect-timeout"], 60.0),
        (["run", "x.py", "--sync-every"], 60.0),
        (["run", "x.py", "--hang-after"], 60.0),
        (["emulator", "preempt", "n", "--notice"], 60.0),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_seconds_flags_read_durations_and_bare_numbers(args, seconds_seen) -> None:
    from tpuctl.errors import UsageError

    command = get_command(app)
    words = [a for a in args if not a.startswith("-") and a not in ("n", "x.py")]
    for w in words:
        command = command.commands[w]  # type: ignore[attr-defined]
    for given, seen in (("1m", seconds_seen), ("90", 90.0), ("1m30s", 90.0)):
        ctx = command.make_context(words[-1], [*args[len(words) :], given])
        assert ctx.params[args[-1].lstrip("-").replace("-", "_")] == seen
    with pytest.raises(UsageError, match=re.escape(args[-1])):
        command.make_context(words[-1], [*args[len(words) :], "1x"])


def test_a_bad_duration_is_a_usage_error_naming_it(cli) -> None:  # noqa: ANN001
    from tests.cli.conftest import one_line_error

    r = cli("top", "--interval", "soon")
    assert r.code == 2
    assert "--interval 'soon'" in one_line_error(r)
    r = cli("top", "--interval", "0.1")
    assert r.code == 2 and "at least 0.5s" in one_line_error(r)
