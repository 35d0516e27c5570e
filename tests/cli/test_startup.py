"""What start-up skips, and that skipping it changes nothing a user sees: the top-level help
from its kept copy, a command's tree without the other commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_help import COMMANDS
from tpuctl import quick_help
from tpuctl.cli import declare, make_app

SHOW_CLICK = (
    "import sys\n"
    "from tpuctl import entry\n"
    "sys.argv = ['tpuctl', *sys.argv[1:]]\n"
    "try:\n"
    "    entry.main()\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "print('CLICK', 'click' in sys.modules, code, file=sys.stderr)\n"
)


def _tpuctl(*args: str, columns: int = 100, **env: str) -> subprocess.CompletedProcess[str]:
    """`tpuctl ARGS` through its entry point, saying on stderr's last line whether it
    imported click."""
    full = {**os.environ, "COLUMNS": str(columns), **env}
    return subprocess.run(
        [sys.executable, "-c", SHOW_CLICK, *args], env=full, capture_output=True, text=True
    )


def test_the_second_help_is_the_first_without_loading_the_command_line(isolated_env) -> None:
    first = _tpuctl("--help")
    assert first.stderr.splitlines()[-1] == "CLICK True 0"
    assert first.stdout.startswith("Usage: tpuctl [OPTIONS] COMMAND")
    kept = isolated_env / "state" / "tpuctl" / quick_help.FILE
    assert kept.read_text().split("\n", 1)[1] == first.stdout
    for args in (["--help"], ["-h"], []):
        again = _tpuctl(*args)
        assert again.stderr.splitlines()[-1] == "CLICK False 0", args
        assert again.stdout == first.stdout


def test_another_width_or_a_stale_copy_builds_the_help_again(isolated_env) -> None:
    wide = _tpuctl("--help", columns=100).stdout
    narrow = _tpuctl("--help", columns=52)  # the kept copy is of 100 columns
    assert narrow.stderr.splitlines()[-1] == "CLICK True 0"
    assert narrow.stdout != wide and max(len(ln) for ln in narrow.stdout.splitlines()) <= 52
    kept = isolated_env / "state" / "tpuctl" / quick_help.FILE
    key, _, text = kept.read_text().partition("\n")
    kept.write_text(f"{key} but not quite\nUsage: an old help\n")
    rebuilt = _tpuctl("--help", columns=52)
    assert rebuilt.stderr.splitlines()[-1] == "CLICK True 0" and rebuilt.stdout == text
    kept.write_bytes(b"\xff\xfe not text")
    assert _tpuctl("--help", columns=52).stdout == text


def test_the_key_follows_every_module_of_tpuctl(tmp_path: Path, monkeypatch) -> None:
    import tpuctl

    package = tmp_path / "pkg"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "list_cmd.py").write_text('"""List TPU VMs."""\n')
    monkeypatch.setattr(tpuctl, "__file__", str(package / "__init__.py"))
    before = quick_help.key()
    (package / "cli" / "list_cmd.py").write_text('"""List TPU VMs, and more."""\n')
    edited = quick_help.key()
    assert edited != before
    (package / "cli" / "new_cmd.py").write_text("")
    assert quick_help.key() not in (before, edited)
    monkeypatch.setenv("COLUMNS", "61")
    assert "width 61 " in quick_help.key()


def test_the_width_in_the_key_is_the_one_click_and_rich_will_use(monkeypatch) -> None:
    import shutil

    for columns in ("61", "0", "-3", "wide", None):  # set, not positive, not a number, unset
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        assert quick_help._columns() == shutil.get_terminal_size().columns, columns


def test_only_the_top_level_help_is_kept(isolated_env) -> None:
    assert not quick_help.wanted(["list", "--help"])
    assert not quick_help.wanted(["--help", "--debug"])
    assert not quick_help.wanted([], {"_TPUCTL_COMPLETE": "bash_complete"})
    r = _tpuctl("list", "--help")
    assert r.stdout.startswith("Usage: tpuctl list [OPTIONS]")
    assert not (isolated_env / "state" / "tpuctl" / quick_help.FILE).exists()


def test_help_is_printed_where_no_copy_can_be_kept(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for _ in range(2):
        r = _tpuctl("--help", TPUCTL_STATE_DIR=str(blocker / "state"))
        assert r.stderr.splitlines()[-1] == "CLICK True 0"
        assert r.stdout.startswith("Usage: tpuctl [OPTIONS] COMMAND")


@pytest.mark.parametrize("args", [*COMMANDS, ["emulator"]], ids=" ".join)
def test_a_commands_own_tree_gives_the_help_the_whole_tree_gives(args, capsys) -> None:
    def shown(app: declare.App) -> str:

        command = declare.get_command(app)
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            command.main(args=[*args, "--help"], prog_name="tpuctl")
        assert done.value.code == 0
        return str(capsys.readouterr().out)

    assert shown(make_app(args[0])) == shown(make_app())


def test_a_command_loads_no_other_commands_module() -> None:
    code = (
        "import sys\n"
        "from tpuctl.cli import main\n"
        "main(['doctor', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('tpuctl.cli.') and m.split('.')[2]\n"
        "    in ('run', 'gc', 'create', 'emulator_cmd', 'top', 'list_cmd', 'ssh')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_a_misspelt_command_still_finds_its_name(cli) -> None:
    r = cli("lst")
    assert r.code == 2 and "Did you mean 'list'?" in r.err


def test_an_int_option_given_a_word_gets_clicks_own_error(cli) -> None:
    r = cli("logs", "j", "--worker", "many")
    assert r.code == 2 and "Invalid value for '--worker'" in r.err and "integer" in r.err
    # one with a parser of ours (whole_number) says it in its words
    r = cli("list", "--limit", "many")
    assert r.code == 2 and "invalid --limit 'many': a whole number 1 to" in r.err
    assert cli("list", "--limit", "1").code == 0
