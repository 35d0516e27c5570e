"""The options that describe a node are declared once (tpuctl/cli/node_options.py) and
mean the same to `create` and `run`; `run` passes every one of them to the node it makes."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from tpuctl.cli import create as create_cmd
from tpuctl.cli import run as run_cmd
from tpuctl.cli.declare import Argument, Option

CLI = Path(create_cmd.__file__).parent
ZONE = "us-central1-a"
CE_ZONE = "us-central1-c"  # where the emulated Compute Engine offers TPU7x


def _flags_declared_in(path: Path) -> set[str]:
    """Every flag a module declares itself: `declare.Option("--x", ...)` written there."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option":
            found |= {
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and str(a.value).startswith("-")
            }
    return found


def _options(command: typing.Any) -> dict[str, Option]:
    """flag -> the Option a command's parameter is declared with."""
    hints = typing.get_type_hints(command, include_extras=True)
    out = {}
    for hint in hints.values():
        for info in getattr(hint, "__metadata__", ()):
            if isinstance(info, Option) and not isinstance(info, Argument):
                out.update({str(d): info for d in info.decls})
    return out


def test_no_flag_is_declared_in_both_create_and_run() -> None:
    from tpuctl.services.run.options import OPTIONS

    create_flags = _flags_declared_in(CLI / "create.py")
    run_flags = {o.flag for o in OPTIONS if not o.shared}  # run's own; shared: node_options
    assert create_flags and run_flags  # the check reads declarations
    assert create_flags & run_flags == set()


def test_the_node_options_of_create_and_run_are_the_same_declarations() -> None:
    made, ran = _options(create_cmd.create), _options(run_cmd.run)
    shared = set(made) & set(ran)
    wanted = {
        "--version",
        "--spot",
        "--preemptible",
        "--reserved",
        "--reservation",
        "--labels",
        "--network",
        "--subnetwork",
        "--service-account",
        "--scopes",
        "--internal-ip-only",
        "--tags",
        "--ttl",
        "--max-cost",
        "--queued",
        "--slices",
        "--valid-until",
        "--flex-start",
        "--max-run-duration",
    }
    assert wanted <= shared
    assert [f for f in wanted if made[f] is not ran[f]] == []  # one object: one help text


def test_run_gives_the_node_it_makes_every_node_option(cli, emulator, tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text("print('hello')\n")
    r = cli(
        "run",
        str(script),
        "--zone",
        ZONE,
        "--keep",
        "--no-check",
        "--labels",
        "team=ml,cost-center=42",
        "--tags",
        "ssh,web",
        "--network",
        "default",
        "--subnetwork",
        "default",
        "--preemptible",
        "--version",
        "tpu-ubuntu2204-base",
    )
    assert r.code == 0, r.err
    (sent,) = emulator.bodies("create")
    body = sent["body"]
    assert body["labels"]["team"] == "ml" and body["labels"]["cost-center"] == "42"
    assert body["labels"]["tpuctl-job"]  # the job's own label beside the user's
    assert body["tags"] == ["ssh", "web"]
    assert body["schedulingConfig"]["preemptible"] is True
    assert body["runtimeVersion"] == "tpu-ubuntu2204-base"
    (node,) = emulator.nodes()
    assert cli("delete", node["name"].rsplit("/", 1)[1], "--zone", ZONE, "--yes").code == 0


def test_run_takes_a_reservation_on_compute_engine(cli, emulator, tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text("print('hello')\n")
    emulator.reservation(CE_ZONE, "mine", "tpu7x-standard-4t", count=1, specific=True)
    emulator.capacity({CE_ZONE: {"tpu7x": 0}})  # the reservation's capacity is its own
    r = cli(
        "run",
        str(script),
        "-a",
        "tpu7x-8",
        "--zone",
        CE_ZONE,
        "--reservation",
        "mine",
        "--no-check",
    )
    assert r.code == 0, r.err
    sent = emulator.bodies("compute.instances.insert")[-1]["body"]
    assert sent["reservationAffinity"]["values"] == ["mine"]
    assert emulator.instances() == []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--labels", "Team=x"], "invalid label key 'Team' (in Team=x)"),
        (["--spot", "--preemptible"], "--spot and --preemptible are exclusive"),
        (["--reservation", "r"], "--reservation NAME is Compute Engine's"),
    ],
)
def test_run_refuses_a_bad_node_option_before_any_node(cli, emulator, tmp_path, flags, said):  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text("print('hello')\n")
    r = cli("run", str(script), "--zone", ZONE, "--no-check", *flags)
    assert r.code == 2, r.err
    assert said in r.err and "Traceback" not in r.err
    assert emulator.nodes() == []
