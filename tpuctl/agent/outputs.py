"""Which outputs in the bucket an attempt restores (`Outputs`): on the first attempt
none, on a later one only the files an earlier attempt of this job uploaded, as their
manifests say, each with the content it had then.

The outputs folder in the bucket (tpuctl/jobs/<id>/outputs/) can be written by any job
VM, also before the job starts: a `ckpt.pkl` planted there would be restored into
TPUCTL_OUTPUT_DIR, and a script that resumes from its checkpoint would run it (pickle).
So after each sync that changed something, each worker writes the manifest of what it
knows the bucket holds of its outputs (each file's sha256), signed with the job's own
key (signing.py: derived on the laptop for this job alone, so no other job can make it):

    tpuctl/jobs/<id>/manifests/slice-<s>/worker-<k>.json
        {"version": 1, "job": ID, "slice": S, "worker": K, "attempt": A,
         "files": {"relative/path": SHA256, ...}, "sizes": {"relative/path": BYTES, ...},
         "signature": ...}

A later attempt reads the manifests of its slice, keeps those signed with the job's key,
of this job and slice, and downloads only the files they name, each checked against a
sha256 one of them gives it; everything else in the folder is left there, said in one
line. What the signature cannot tell: a manifest of an earlier sync of the same job
(another writer may put back an older manifest with the objects it named, so a
later attempt would resume from an older checkpoint of this very job).

Standard library only, Python 3.8+.
"""

from __future__ import annotations

from typing import Any, Callable

from . import signing
from .manifests import LIMIT as MANIFEST_LIMIT
from .manifests import VERSION, some, trusted
from .net import HttpError
from .protocol import job_path
from .storage import Storage
from .transfer import OutputSync


class Outputs:
    """The outputs' manifests of one worker of one job's attempt."""

    def __init__(
        self,
        storage: Storage,
        job: str,
        slice_id: int,
        worker: int,
        attempt: int,
        key: str,
        say: Callable[[str], None],
    ) -> None:
        self.storage, self.job, self.slice, self.worker = storage, job, slice_id, worker
        self.attempt, self.key, self.say = attempt, key, say
        self.folder = job_path(job, "manifests", f"slice-{slice_id}", "")

    def write(self, hashes: dict[str, str], sizes: dict[str, int]) -> None:
        """This worker's manifest: the files of `hashes`, and their `sizes` (the laptop
        downloads no object of another size: OutputSync.on_synced)."""
        if not self.key:
            return
        value = {
            "version": VERSION,
            "job": self.job,
            "slice": self.slice,
            "worker": self.worker,
            "attempt": self.attempt,
            "files": hashes,
            "sizes": {k: v for k, v in sizes.items() if k in hashes},
        }
        name = f"{self.folder}worker-{self.worker}.json"
        self.storage.write_json(name, signing.sign(value, self.key))

    def restore(self, sync: OutputSync) -> int:
        """Into the attempt's outputs folder: nothing on the first attempt, else what the
        manifests allow (said); returns how many files came."""
        if self.attempt <= 1:
            sync.start_empty()
            return 0
        if not self.key:
            self.say("outputs: the agent was given no job key: nothing is restored")
            sync.start_empty()
            return 0
        restored = sync.restore(self.allowed())
        if sync.skipped:
            self.say(
                f"outputs: {len(sync.skipped)} file(s) in the bucket that no attempt of this "
                f"job uploaded were not restored ({some(sync.skipped)})"
            )
        if sync.refused:
            self.say(
                f"outputs: {len(sync.refused)} file(s) in the bucket changed since this job "
                f"uploaded them were not restored ({some(sync.refused)})"
            )
        if restored:
            self.say(f"outputs: restored {restored} file(s) an earlier attempt uploaded")
        return restored

    def allowed(self) -> dict[str, set[str]]:
        """Each file the signed manifests of this job and slice name, with its sha256s
        (two workers of a slice may have sent the same file with different content)."""
        allowed: dict[str, set[str]] = {}
        unsigned = 0
        for item in self.storage.objects(self.folder):
            if int(item.get("size") or 0) > MANIFEST_LIMIT:
                unsigned += 1
                continue
            try:
                value, _ = self.storage.read_json(item["name"], MANIFEST_LIMIT)
            except (HttpError, ValueError):
                value = None
            if not self.trusted(value):
                unsigned += 1
                continue
            for relative, sha in (value or {})["files"].items():
                allowed.setdefault(str(relative), set()).add(str(sha))
        if unsigned:
            self.say(
                f"outputs: {unsigned} manifest(s) of this job's outputs are not signed "
                "with this job's key (another writer of the bucket made them): ignored"
            )
        return allowed

    def trusted(self, value: Any) -> bool:
        return trusted(value, self.key, self.job) and value.get("slice") == self.slice
