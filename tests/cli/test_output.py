"""What people see: NO_COLOR on a terminal, progress lines without one, one message per fact."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pexpect
import pytest

from tests.cli.conftest import one_line_error
from tpuctl.cli import render


def _on_a_terminal(*args: str, no_color: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update({"TERM": "xterm-256color", "COLUMNS": "120"})
    if no_color:
        env["NO_COLOR"] = "1"
    child = pexpect.spawn(
        sys.executable, ["-m", "tpuctl", *args], env=env, encoding="utf-8", timeout=60
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


def test_no_color_means_no_escape_sequence_even_on_a_terminal(cli, emulator) -> None:
    assert cli("create", "shown", "-a", "v3-8").code == 0
    assert "\x1b[" in _on_a_terminal("list", no_color=False)  # rich styles the table here...
    assert "\x1b[" not in _on_a_terminal("list", no_color=True)  # ...and not with NO_COLOR
    assert cli("delete", "shown", "--yes").code == 0


def test_progress_without_a_terminal_prints_each_state_once_then_heartbeats(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with render.progress("deleting:") as update:
        for state in ("a DELETING", "b DELETING", "a DELETING", "b DELETING"):
            update(state, 1.0)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["deleting: a DELETING (1s)", "deleting: b DELETING (1s)"]

    monkeypatch.setattr(render, "HEARTBEAT", 0.0)  # every call is past the heartbeat
    with render.progress("creating n:") as update:
        update("CREATING", 2.0)
        update("CREATING", 40.0)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["creating n: CREATING (2s)", "creating n: still CREATING (40s)"]


def test_delete_of_a_missing_node_says_it_once_with_the_way_to_find_it(cli, emulator) -> None:
    r = cli("delete", "ghost", "--yes")
    assert r.code == 4
    assert r.err.count("not found") == 1
    assert one_line_error(r) == "error: ghost: not found in zone us-central1-a"
    assert "`tpuctl list --all-zones` shows your nodes" in r.err


def test_stopping_a_slice_hints_a_delete_that_works(cli, emulator) -> None:
    assert cli("create", "pod", "-a", "v4-32", "--zone", "us-central2-b").code == 0
    r = cli("stop", "pod", "--zone", "us-central2-b")
    assert r.code == 2
    assert "`tpuctl delete pod --zone us-central2-b`" in r.err
    assert cli("delete", "pod", "--zone", "us-central2-b", "--yes").code == 0


def test_v5e_names_are_understood_and_hints_read_well(cli, emulator) -> None:
    r = cli("create", "lite", "-a", "v5e-8", "--zone", "us-east5-a", "--no-wait", "--json")
    assert r.code == 0, r.err
    assert cli("describe", "lite", "--zone", "us-east5-a").out.count("v5litepod-8") >= 1
    assert cli("delete", "lite", "--zone", "us-east5-a", "--yes").code == 0
    r = cli("create", "old", "-a", "v4-8")  # the default zone offers no v4
    assert r.code == 2
    assert "v4-8 is offered in us-central2-b (--zone)." in r.err
    assert "?;" not in r.err


def test_create_defaults_to_a_type_the_default_zone_offers(cli, emulator) -> None:
    r = cli("create", "plain")
    assert r.code == 0, r.err
    assert "v3-8" in r.out
    assert cli("delete", "plain", "--yes").code == 0


def test_tables_have_no_trailing_spaces(cli, emulator) -> None:
    assert cli("create", "a-long-node-name", "-a", "v3-8").code == 0
    assert cli("create", "b", "-a", "v3-8", "--ttl", "2h").code == 0
    for args in (("list",), ("describe", "b"), ("quota",)):
        r = cli(*args)
        assert r.code == 0, r.err
        assert r.out.strip()
        assert [ln for ln in r.out.splitlines() if ln != ln.rstrip()] == [], args
    assert cli("delete", "a-long-node-name", "b", "--yes").code == 0


def test_one_worker_is_not_a_range() -> None:
    from tpuctl.errors import UsageError
    from tpuctl.services.ssh import parse_workers

    with pytest.raises(UsageError, match=r"has 1 worker \(0\): there is no worker 1$"):
        parse_workers("1", 1, "node vm")


def _config(isolated_env, text: str) -> None:  # noqa: ANN001
    path = isolated_env / "config" / "tpuctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_prices_from_the_config_file_are_used_and_named(cli, emulator, isolated_env) -> None:
    _config(isolated_env, "[prices.v3]\non_demand = 3.0\n")
    r = cli("create", "priced", "-a", "v3-8")  # 4 chips
    assert r.code == 0, r.err
    assert "v3-8 on-demand: about $12.00/h (estimates from Cloud Billing prices" in r.err
    assert "(v3 from your config file)" in r.err
    (node,) = json.loads(cli("list", "--json").out)
    assert node["hourlyUsd"] == 12.0
    assert cli("delete", "priced", "--yes").code == 0


@pytest.mark.parametrize(
    ("text", "needle", "allowed"),
    [
        ('[prices.v3]\non_demand = "cheap"\n', "prices.v3.on_demand = 'cheap'", "USD per chip"),
        ("[prices.v3]\nspot = -5.0\n", "prices.v3.spot = -5.0", "USD per chip-hour, >= 0"),
        ("[prices.v3]\nondemand = 1.0\n", "prices.v3.ondemand = 1.0", "on_demand or spot"),
        ("[prices.v9]\nspot = 1.0\n", "prices.v9 in tpuctl's config file", "a generation: v2,"),
    ],
)
def test_a_bad_price_is_one_line_naming_the_key(
    cli, emulator, isolated_env, text, needle, allowed
) -> None:
    _config(isolated_env, text)
    r = cli("create", "never", "-a", "v3-8")
    assert r.code == 3
    line = one_line_error(r)
    assert line.startswith(f"error: invalid {needle}")
    assert allowed in line
    assert emulator.nodes() == []


def test_create_without_a_name_picks_one_says_it_first_and_it_works_later(cli, emulator) -> None:
    r = cli("create", "--accelerator", "v3-8")
    assert r.code == 0, r.err
    first = r.err.splitlines()[0]
    assert first.startswith("node name: ")
    name = first.removeprefix("node name: ")
    assert re.fullmatch(r"[a-z][-a-z0-9]{0,61}[a-z0-9]", name) and "v3-8" in name
    assert r.out.split()[0] == name  # stdout starts with it too
    assert [n["name"].rsplit("/", 1)[-1] for n in emulator.nodes()] == [name]
    r = cli("create", "-a", "v3-8", "--no-wait", "--json")
    other = json.loads(r.out)["name"]
    assert other != name
    assert cli("describe", name).code == 0
    assert cli("delete", name, other, "--yes").code == 0


def test_generated_names_are_valid_for_any_user() -> None:
    from tpuctl.services.names import generated_name, validate_name

    for user in ("Ada.Lovelace", "1root", "", "ü" * 40, "x" * 80):
        name = generated_name("v5litepod-256", user=user)
        validate_name(name)


def _complete(words: str) -> list[str]:
    """What bash completion offers for the command line `words` (cursor at the end)."""
    env = {**os.environ, "_TPUCTL_COMPLETE": "bash_complete", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    r = subprocess.run(
        [sys.executable, "-m", "tpuctl"], env=env, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return [line.split(",", 1)[1] for line in r.stdout.splitlines() if line]  # `plain,WORD`


def test_completion_offers_nodes_zones_types_and_jobs(cli, emulator, tmp_path) -> None:
    assert cli("create", "alpha", "-a", "v3-8").code == 0
    assert cli("create", "beta", "-a", "v3-8").code == 0
    assert _complete("tpuctl describe al") == ["alpha"]
    assert _complete("tpuctl delete ") == ["alpha", "beta"]
    assert "us-central2-b" in _complete("tpuctl create x --zone us-central2")
    offered = _complete("tpuctl create x -a v5")
    assert "v5litepod-16" in offered and "v3-8" not in offered
    script = tmp_path / "job.py"
    script.write_text("print('hi')\n")
    r = cli("run", str(script), "--node", "alpha", "--keep")
    assert r.code == 0, r.err
    job = r.err.split("job ")[1].split(":")[0]
    assert _complete("tpuctl logs 2") == [job]
    assert cli("delete", "alpha", "beta", "--yes").code == 0


def test_completion_without_a_cloud_offers_nothing_and_says_nothing(cli, emulator) -> None:
    os.environ["TPUCTL_EMULATOR_HOST"] = "127.0.0.1:1"  # nothing answers there
    try:
        assert _complete("tpuctl describe ") == []
    finally:
        os.environ["TPUCTL_EMULATOR_HOST"] = emulator.address


@pytest.mark.parametrize("answer", ["n", "y"])
def test_a_question_on_a_terminal_leaves_a_redirected_stdout_clean(
    cli, emulator, tmp_path, answer
) -> None:
    """`delete` asks on the terminal (stderr) while stdout goes to a file: the file gets
    its result and nothing of the question (click's confirm wrote the question's last
    character, a space, to stdout)."""
    assert cli("create", "asked", "-a", "v3-8", "--no-wait").code == 0
    out = tmp_path / "stdout.txt"
    command = f"{sys.executable} -m tpuctl delete asked > {out}"
    child = pexpect.spawn("/bin/sh", ["-c", command], env=dict(os.environ), encoding="utf-8",
                          timeout=60)  # fmt: skip
    child.expect_exact("Delete node asked? [y/N]: ")
    child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    assert out.read_text() == ("" if answer == "n" else "asked: deleted\n")
    if answer == "n":
        assert child.exitstatus == 1 and "nothing deleted" in str(child.before)
        assert cli("delete", "asked", "--yes").code == 0
    else:
        assert child.exitstatus == 0
        assert [n["name"] for n in emulator.nodes()] == []
