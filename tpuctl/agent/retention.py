"""The job's request and record against the bucket's retention rule (`Kept`).

`tpuctl init` offers a lifecycle rule deleting what is under tpuctl/jobs/ once N days
old, and Cloud Storage counts an object's age from its creation
(https://cloud.google.com/storage/docs/lifecycle#age): a job running longer than N days
would lose what it wrote once. Its request, which a restart after a preemption runs, its
record, which the laptop's commands read, and the outputs it never rewrote, which a
restart restores. So every --refresh-every seconds (6 h; the shortest retention is a
day) worker 0 writes the request and the record again (a new generation is a new object:
its age starts over), from the copies kept on the VM at the start if a rule took them
already, and every worker uploads again the outputs of its own that the bucket no longer
has (job.py). The request is always written from the verified copy: one rewritten in the
bucket meanwhile is put back as submitted.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from .net import HttpError, Json
from .protocol import job_record_path, request_path
from .storage import Storage


class Kept:
    """The copies of the job's request (as verified) and record (as fetched) in the job's
    folder on the VM, and their renewal in the bucket."""

    def __init__(
        self, storage: Storage, job_id: str, folder: Path, say: Callable[[str], None]
    ) -> None:
        self.storage, self.say = storage, say
        self.objects = (
            ("request", request_path(job_id), folder / "request.json"),
            ("record", job_record_path(job_id), folder / "job.json"),
        )

    def keep(self, request: Json) -> None:
        """Keep the verified request, and the record as the bucket has it now."""
        self.objects[0][2].write_text(json.dumps(request))
        try:
            described, _ = self.storage.read_json(self.objects[1][1])
        except HttpError as e:  # only a description: the job goes on without a copy
            self.say(f"could not keep a copy of the job record: {e}")
            return
        if described is not None:
            self.objects[1][2].write_text(json.dumps(described))

    def renew(self) -> None:
        """Write the request and the record again: new generations, whose age starts now."""
        for what, name, copy in self.objects:
            value, generation = self.storage.read_json(name)
            if value is None or what == "request":
                if not copy.is_file():  # neither in the bucket nor kept here
                    self.say(f"the job {what} is gone from the bucket, and no copy is kept here")
                    continue
                if value is None:
                    self.say(
                        f"the job {what} was gone from the bucket (a lifecycle rule?): "
                        "written again from the copy fetched at the start"
                    )
                value = json.loads(copy.read_text())
            try:
                self.storage.write_json(name, value, if_generation_match=generation)
            except HttpError as e:
                if e.status != 412:  # 412: written meanwhile, so new already
                    raise
