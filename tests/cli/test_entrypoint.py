"""The entry points, the error boundary, and fast start-up."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.cli.conftest import one_line_error


def test_python_m_tpuctl_version() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tpuctl", "--version"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0
    assert r.stdout.startswith("tpuctl ")


def test_help_does_not_import_google_clients() -> None:
    code = (
        "import sys\n"
        "from tpuctl.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('google', 'grpc', 'asyncssh')))\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage" in r.stdout or "create" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "HEAVY="


def test_every_command_has_help_with_an_example(cli) -> None:
    for cmd in ("create", "list", "describe", "stop", "start", "delete"):
        r = cli(cmd, "--help")
        assert r.code == 0, (cmd, r.err)
        assert "Example: tpuctl" in r.out, cmd


def test_unknown_command_is_a_usage_error(cli) -> None:
    r = cli("frobnicate")
    assert r.code == 2
    assert "No such command 'frobnicate'" in one_line_error(r)


def test_debug_shows_the_traceback(cli) -> None:
    r = cli("describe", "Bad_Name", "--debug")
    assert r.code == 2
    assert "Traceback" in r.err
    assert "error: invalid node name" in r.err


def test_an_unreachable_emulator_is_named(cli, monkeypatch) -> None:
    monkeypatch.setenv("TPUCTL_EMULATOR_HOST", "127.0.0.1:1")  # nothing listens there
    r = cli("list")
    assert r.code == 6
    assert "cannot reach the local emulator at 127.0.0.1:1" in one_line_error(r)
    assert "tpuctl emulator start --detach" in r.err
    r = cli("list", "-p", "my-project", "-z", "us-central1-a")  # with a project: the first call
    assert r.code == 6
    assert one_line_error(r) == (
        "error: cannot reach the local emulator at 127.0.0.1:1: nothing listens on port 1"
    )


def test_no_arguments_prints_the_help_and_no_error(cli) -> None:  # noqa: ANN001
    r = cli()
    assert r.code == 0
    assert "Usage: tpuctl" in r.out
    assert r.err == ""


def test_a_script_flag_before_the_double_dash_is_explained(cli, tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    r = cli("run", str(script), "--steps", "10")
    assert r.code == 2
    assert "No such option: --steps" in r.err
    assert "arguments for your script go after `--`: `tpuctl run SCRIPT -- --steps ...`" in r.err


def test_a_signal_between_the_commands_end_and_ignoring_signals_is_caught(
    monkeypatch, capsys
) -> None:  # noqa: ANN001
    """A second Ctrl-C just after the command said "error: interrupted" (seen in `make
    chaos`) ends tpuctl with the command's status, not by the signal nor a traceback."""
    import pytest

    import tpuctl.cli
    from tpuctl import entry, interrupts

    monkeypatch.setattr(tpuctl.cli, "main", lambda: 130)
    calls: list[int] = []
    real_quiet = interrupts.quiet

    def quiet() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the signal lands while handlers are being changed
        real_quiet()

    monkeypatch.setattr(interrupts, "quiet", quiet)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as ended:
            entry.main()
    finally:
        for sig, handler in before.items():  # entry.main ignored them as it ended
            signal.signal(sig, handler)
    assert ended.value.code == 130
    assert capsys.readouterr().err == ""  # the command already said it; nothing twice
