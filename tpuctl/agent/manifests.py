"""The manifests of a job's outputs, as the agents write them and as the client trusts
them (the job protocol's: the laptop checks what comes home by them, services/outputs.py).

    tpuctl/jobs/<id>/manifests/slice-<s>/worker-<k>.json
        {"version": 1, "job": ID, "slice": S, "worker": K, "attempt": A,
         "files": {"relative/path": SHA256, ...}, "sizes": {"relative/path": BYTES, ...},
         "signature": ...}

signed with the job's key (signing.job_key: derived from the client's key for this job
alone; the laptop derives it again to check them). Standard library only, Python 3.8+.
"""

from __future__ import annotations

from typing import Any

from . import signing

VERSION = 1
LIMIT = 64 << 20  # bytes: a manifest bigger than this is not read (bounded memory)


def trusted(value: Any, key: str, job: str) -> bool:
    """A manifest of job `job`'s outputs, signed with `key`."""
    return (
        signing.signed(value, key)
        and value.get("version") == VERSION
        and value.get("job") == job
        and isinstance(value.get("slice"), int)
        and isinstance(value.get("files"), dict)
    )


def some(names: list[str]) -> str:
    """A few of `names` for a line that says what was left out: `a, b, c, ...`."""
    shown = ", ".join(sorted(names)[:3])
    return shown + (", ..." if len(names) > 3 else "")
