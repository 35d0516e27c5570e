"""`make chaos`'s scenarios of trust (bench/chaos.py runs them; docs/security.md):

- rewritten: a job's request and record rewritten in the bucket between its attempts,
             with a job VM's own token (any job VM may write under tpuctl/jobs/; here
             the job's own first attempt does it, as another job's script could): the
             next attempt must be refused, the rewritten setup never run, `run` end
             non-zero saying `refused`, and no node be left;
- squatted:  the default bucket `<project>-tpuctl` created first by another project:
             `run` must refuse it (exit 3, naming its owner), create no node and upload
             nothing.

Each run goes in a project of its own.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tests.attack import REWRITE

if TYPE_CHECKING:
    from chaos import Harness, Outcome

ZONE = "us-central1-a"


def rewritten(h: Harness, runs: int) -> Outcome:
    from chaos import Outcome, _traceback

    out = Outcome("record rewritten between attempts")
    h.reset(instant=True)
    script = h.root / "rewrite" / "rewrite.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(REWRITE)  # the first attempt rewrites the request, then fails

    def one(i: int) -> tuple[int, subprocess.CompletedProcess[str], bool]:
        project = f"chaos-rewrite-{i}"
        marker = h.root / f"rewritten-{i}"
        r = h.tpuctl("run", str(script), "--zone", ZONE, "--project", project,
                     "--retry-on-failure", "--restarts", "1",
                     "--", f"{project}-tpuctl", "-", str(marker), "fail")  # fmt: skip
        return i, r, marker.exists()

    with ThreadPoolExecutor(3) as pool:
        for i, r, ran in pool.map(one, range(runs)):
            out.runs += 1
            out.tracebacks += _traceback(r.stderr)
            refused = "refused: the request in the bucket" in r.stderr
            left = h.leftovers(f"chaos-rewrite-{i}")
            out.leaked += bool(left)
            if ran:
                out.notes.append("the rewritten setup ran")
            elif r.returncode in (0, None) or not refused or "second attempt ran" in r.stdout:
                out.notes.append(f"exit {r.returncode}: {r.stderr.strip()[-160:]}")
            elif not left and not _traceback(r.stderr):
                out.good += 1
    h.clean()
    return out


def squatted(h: Harness, runs: int) -> Outcome:
    from chaos import Outcome, _traceback
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    out = Outcome("bucket squatted before the first run")
    h.reset(instant=True)
    squatter = storage.Client(
        project="chaos-squatter",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": h.control.status()["storage_endpoint"]},
    )
    for i in range(runs):
        project = f"chaos-squat-{i}"
        bucket = squatter.create_bucket(f"{project}-tpuctl")
        r = h.tpuctl("run", str(h.script), "--zone", ZONE, "--project", project, "--", "0", "0")
        out.runs += 1
        out.tracebacks += _traceback(r.stderr)
        sent = [b.name for b in squatter.list_blobs(bucket.name)]
        left = h.leftovers(project)
        out.leaked += bool(left)
        named = f"gs://{project}-tpuctl belongs to another project" in r.stderr
        if r.returncode == 3 and named and not sent and not left and not _traceback(r.stderr):
            out.good += 1
        else:
            out.notes.append(f"exit {r.returncode}, {len(sent)} object(s) sent: "
                             f"{r.stderr.strip()[-160:]}")  # fmt: skip
    h.clean()
    return out
