"""How `tpuctl stacks` compares workers (services/stacks.py): thread ids, pids and the
agent's header are no difference; the stacks most workers share come first."""

from __future__ import annotations

from tpuctl.services import stacks

COMMON = """\
# job J, worker {w}, 20261205-000000 (faulthandler)
== process {pid}: python3 train.py
Current thread 0x00007f{w}d2dbc3b80 (most recent call first):
  File "train.py", line 12 in all_reduce
"""
ODD = COMMON.replace("line 12 in all_reduce", "line 8 in wait_for_peer")


def test_the_same_stacks_on_other_pids_and_threads_are_one_group() -> None:
    dumps = {w: COMMON.format(w=w, pid=100 + w) for w in (0, 2, 3)}
    dumps[1] = ODD.format(w=1, pid=4242)
    groups = stacks.grouped(dumps)
    assert [ws for ws, _ in groups] == [[0, 2, 3], [1]]
    assert groups[0][1] == (
        "== process: python3 train.py\n"
        "Current thread (most recent call first):\n"
        '  File "train.py", line 12 in all_reduce\n'
    )
    assert "wait_for_peer" in groups[1][1]


def test_py_spy_thread_ids_and_pids_are_left_out_too() -> None:
    a = 'Process 123: python3 train.py\nThread 123 (idle): "MainThread"\n    wait (train.py:8)\n'
    b = a.replace("123", "987")
    assert stacks.comparable(a) == stacks.comparable(b)
    assert len(stacks.grouped({0: a, 1: b})) == 1
