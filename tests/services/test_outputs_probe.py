"""The try of an outputs folder before a run (services/outputs.unwritable): what cannot
be written is named; runs started together in one work dir all pass it."""

from __future__ import annotations

import threading
from pathlib import Path

from tpuctl.services.outputs import unwritable


def test_what_cannot_hold_outputs_is_named(tmp_path: Path) -> None:
    assert unwritable(Path("/proc/x")) == "cannot create /proc/x: No such file or directory"
    (tmp_path / "file").write_text("")
    assert unwritable(tmp_path / "file" / "x") == f"{tmp_path / 'file'} is not a folder"
    assert unwritable(tmp_path / "a" / "b") == ""
    assert not (tmp_path / "a").exists()  # what the try made is gone again


def test_runs_started_together_in_one_folder_all_pass_the_try(tmp_path: Path) -> None:
    """Each try makes the missing folder and removes it again: another's mkdir meets it
    made, or its probe meets it removed (the quick chaos run starts three runs at once)."""
    found: list[str] = []
    start = threading.Barrier(6)

    def tries() -> None:
        start.wait()
        found.extend(unwritable(tmp_path / "outputs") for _ in range(150))

    threads = [threading.Thread(target=tries) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(found) == {""}
