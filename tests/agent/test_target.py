"""What the client tells the node's programs they run on (`--target KIND:NAME`): every
API's adapter names a kind the agent knows, and a kind it does not know is refused by
each program before it does anything, saying so on stderr (the startup script's programs
write it to their logs)."""

from __future__ import annotations

import subprocess

import pytest

from tests.agent.conftest import checked, install_bundle
from tpuctl.agent import target
from tpuctl.cloud import registry


@pytest.mark.parametrize("kind", registry.KINDS, ids=lambda k: k.key)
def test_every_api_names_its_node_as_the_agent_reads_it(kind: registry.BackendKind) -> None:
    flag, value = kind.agent_target("my-node")
    assert flag == "--target"
    assert target.parse(value) == (kind.key, "my-node")
    assert target.module_of(kind.key).TARGET  # a class reads, labels, stops and deletes such a node


PROGRAMS = [
    ["agent", "start", "--job-id", "j1", "--bucket", "b"],
    ["guard"],
    ["idle", "watch"],
    ["checkup"],
]


def _run(home, argv: list[str]) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    bundle = install_bundle(home)
    # no endpoint is set: a program that got past its arguments would fail otherwise
    return subprocess.run(
        checked(bundle, *argv),
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("argv", PROGRAMS, ids=lambda a: a[0])
def test_an_unknown_target_kind_is_refused_with_what_the_agent_knows(tmp_path, argv) -> None:  # noqa: ANN001
    done = _run(tmp_path, [*argv, "--target", "lab:bench"])
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert (
        "argument --target: unknown target kind 'lab' in 'lab:bench': the agent knows "
        "compute, tpu (KIND:NAME)"
    ) in done.stderr


def test_a_target_without_a_name_is_refused(tmp_path) -> None:  # noqa: ANN001
    done = _run(tmp_path, ["guard", "--target", "tpu:"])
    assert done.returncode == 2
    assert "'tpu:' names no node: KIND:NAME, e.g. tpu:my-node" in done.stderr


@pytest.mark.parametrize("argv", PROGRAMS[:3], ids=lambda a: a[0])
def test_the_programs_that_act_on_the_node_need_a_target(tmp_path, argv) -> None:  # noqa: ANN001
    done = _run(tmp_path, argv)
    assert done.returncode == 2
    assert "--target" in done.stderr


def test_a_label_set_on_the_tpu_api_keeps_what_another_party_set_since_the_tick_began(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watchdog read the node at the start of its tick; meanwhile a user shortened
    the idle timeout and asked to keep the node. Writing its activity label must not
    undo either (the TPU API's PATCH of `labels` replaces them all)."""
    import json

    from tpuctl.agent import tpu_api

    stored = {"labels": {"tpuctl-idle-timeout": "3600", "tpuctl-managed": "true"}}
    calls: list[tuple[str, str]] = []

    def tpu(token: object, method: str, path: str, body: bytes | None = None) -> bytes:
        calls.append((method, path))
        if method == "PATCH":
            stored["labels"] = json.loads(body or b"{}")["labels"]
        return json.dumps(stored).encode()

    monkeypatch.setattr(tpu_api, "tpu", tpu)
    node = tpu_api.TpuNode(None, "p", "z", "n", 1)  # type: ignore[arg-type]
    seen = node.view()  # the tick's read
    stored["labels"] = {**stored["labels"], "tpuctl-idle-timeout": "2", "tpuctl-keep": "true"}
    node.set_label("tpuctl-last-active", "1700000000", seen)
    assert stored["labels"] == {
        "tpuctl-idle-timeout": "2",
        "tpuctl-managed": "true",
        "tpuctl-keep": "true",
        "tpuctl-last-active": "1700000000",
    }
    assert calls[-1] == ("PATCH", "projects/p/locations/z/nodes/n?updateMask=labels")
