"""At 80 columns, tables drop their lower-value columns and never cut an identifier."""

from __future__ import annotations

import os
import re
import sys

import pexpect

from tpuctl.cli import render

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NAME = "experiment-v3-8-with-a-long-descriptive-name-0042"  # 49 characters


def _on_an_80_column_terminal(*args: str) -> list[str]:
    env = {**os.environ, "TERM": "xterm", "NO_COLOR": "1"}
    env.pop("COLUMNS", None)  # the terminal's own width, as a user has it
    child = pexpect.spawn(
        sys.executable, ["-m", "tpuctl", *args], env=env, encoding="utf-8", timeout=60,
        dimensions=(40, 80),
    )  # fmt: skip
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return [ANSI.sub("", line) for line in str(child.before).splitlines()]


def test_list_at_80_columns_keeps_names_and_zones_whole(cli, emulator) -> None:
    assert cli("create", NAME, "-a", "v3-8").code == 0
    lines = _on_an_80_column_terminal("list")
    (header,) = [ln for ln in lines if ln.startswith("NAME")]
    (row,) = [ln for ln in lines if ln.startswith(NAME)]
    assert all(len(ln) <= 80 for ln in lines if not ln.startswith("hidden: ")), lines
    assert row.split()[:3] == [NAME, "us-central1-a", "v3-8"]  # whole, to paste
    assert not any("…" in ln for ln in lines)  # nothing cut: what does not fit folds
    assert "HEALTH" not in header and "OWNER" not in header  # dropped first
    (said,) = [ln for ln in lines if ln.startswith("hidden: ")]  # never in silence
    assert "OWNER" in said and "HEALTH" in said and said.endswith("; --wide shows all")
    wide = _on_an_80_column_terminal("list", "--wide")
    assert any("OWNER" in ln and "HEALTH" in ln for ln in wide)  # every column
    assert not any("…" in ln for ln in wide)
    assert not any(ln.startswith("hidden: ") for ln in wide)
    assert cli("delete", NAME, "--yes").code == 0


def test_list_at_80_columns_shows_when_a_node_goes_and_what_it_cost(cli, emulator) -> None:
    assert cli("create", "exp1", "-a", "v3-8", "--ttl", "8h").code == 0
    lines = _on_an_80_column_terminal("list")
    (header,) = [ln for ln in lines if ln.startswith("NAME")]
    assert "EXPIRES" in header and "COST" in header  # money goes last
    (row,) = [ln for ln in lines if ln.startswith("exp1")]
    assert re.search(r" 7h5\dm$", row), row  # when the node deletes itself
    assert cli("keep", "exp1").code == 0
    (row,) = [ln for ln in _on_an_80_column_terminal("list") if ln.startswith("exp1")]
    assert row.endswith(" kept")  # never deleted at its expiry
    assert cli("delete", "exp1", "--yes").code == 0


def test_fitted_drops_the_highest_drop_first_and_keeps_identifiers() -> None:
    cols = [render.Col("ID", ident=True), render.Col("STATE"), render.Col("A", drop=1),
            render.Col("B", drop=2)]  # fmt: skip
    rows = [["20261201-084923-ab12cd", "RUNNING", "a" * 20, "b" * 20]]
    headers = lambda width: [c.header for c in render.fitted(cols, rows, width).columns]  # noqa: E731
    assert headers(200) == ["ID", "STATE", "A", "B"]
    assert headers(60) == ["ID", "STATE", "A"]  # B goes first
    assert headers(30) == ["ID", "STATE"]  # never the identifier or an undroppable column
    assert headers(None) == ["ID", "STATE", "A", "B"]  # piped: everything


def test_jobs_at_80_columns_says_what_it_hid(cli, emulator, tmp_path) -> None:
    (tmp_path / "job.py").write_text("print('trained')\n")
    assert cli("run", str(tmp_path / "job.py"), "-a", "v3-8", "--json").code == 0
    lines = _on_an_80_column_terminal("jobs")
    (header,) = [ln for ln in lines if ln.startswith("JOB ")]
    assert all(len(ln) <= 80 for ln in lines if not ln.startswith("hidden: ")), lines
    assert "STARTED" not in header
    (said,) = [ln for ln in lines if ln.startswith("hidden: ")]  # as `list` says it
    assert "STARTED" in said.split("; ")[0] and said.endswith("; --wide shows all")
