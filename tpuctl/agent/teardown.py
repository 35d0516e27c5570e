"""The end of a job's attempt on worker 0 (`Teardown`, which `job.Job` is): once every
worker has ended (or could not be seen for --stale seconds), the node deleted (this VM
included), or on a multislice job its queued resource, unless another job claimed the
node; and the supervisor's part when the agent died before it could.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from . import claims, protocol
from .net import HttpError, Json
from .protocol import status_path
from .storage import Storage
from .target import Target
from .tpu_health import LEFT
from .transfer import LogUploader, StatusWriter


class Teardown:
    """What ends an attempt (a `Job` is one: these are its attributes)."""

    args: argparse.Namespace
    storage: Storage
    status: StatusWriter
    log: LogUploader
    me: Json
    node: Target
    worker: int
    total: int
    say: Callable[[str], None]
    quietly: Callable[[Callable[[], Any]], None]
    client: claims.Renewals

    def unstarted(self) -> float | None:
        """How long a peer with no status of this attempt may take to start: --start-wait
        while the client renews its lease (it is still starting the agents, and a peer's
        VM may answer SSH minutes after this one's); None (--stale) once it does not."""
        wait = float(getattr(self.args, "start_wait", 0.0) or 0.0)
        return wait if wait and self.client.alive() else None

    def after_death(self, state: str, error: str) -> None:
        """The supervisor's part once the agent died: a final status with the error
        (unless the agent wrote one), then, on worker 0, the teardown it still owed."""
        try:
            current, _ = self.storage.read_json(self.status.name)
        except HttpError as e:  # the bucket unreadable: the teardown is still owed
            self.say(f"the bucket could not be read: {e}")
            current = None
        owes_teardown = self.worker == 0 and self.args.teardown
        current = current or {}
        if protocol.is_final(current, self.args.attempt):
            # a host maintenance's notice (the node comes back, the runner waits for it),
            # or a TPU that did not come up (the runner replaces the node)
            if not owes_teardown or "teardown" in current or current.get("reason") in LEFT:
                return
            self.status.value = dict(current)
        else:
            self.say(f"error: {error}")
            self.status.value.update(
                state=state,
                message=error,
                ended=time.time(),
                exit_status=None if state == protocol.LOST else 1,
            )
            self.quietly(self.status.write)
            self.quietly(lambda: self.log.upload(force=True))
        if owes_teardown:
            self.teardown()

    def ended(self, worker: int, since: float, unread: dict[int, float]) -> bool:
        """Has `worker` ended this attempt, or stopped answering for --stale seconds? A
        status that cannot be read (`unread`: since when, by worker) is no sign of life:
        once it has been unreadable for --stale seconds, the worker counts as ended."""
        try:
            st = self.storage.read_json(status_path(self.args.job_id, worker))[0]
        except HttpError as e:
            first = unread.setdefault(worker, time.monotonic())
            if time.monotonic() - first <= self.args.stale:
                return False
            self.say(
                f"teardown: worker {worker}'s status could not be read for "
                f"{self.args.stale:g}s (the heartbeat deadline, --stale): {e}; "
                "tearing down regardless"
            )
            return True
        unread.pop(worker, None)
        if not st or st.get("attempt") != self.args.attempt:  # its agent has not started
            return time.time() - since > max(self.args.stale, self.unstarted() or 0.0)
        return protocol.is_final(st) or time.time() - st.get("heartbeat", 0) > self.args.stale

    def teardown(self) -> None:
        """On worker 0: once every worker has ended, delete the node (this VM included);
        on a multislice job, its queued resource, which takes every slice with it. The
        wait has a deadline: a worker that cannot be seen (the bucket unreadable) counts
        as ended after --stale seconds, so the node never bills on for a bucket it cannot
        read."""
        since, waiting = time.time(), list(range(self.total))
        unread: dict[int, float] = {}  # worker -> since when its status could not be read
        while True:  # every worker looked at each round: their deadlines run together
            waiting = [k for k in waiting if not self.ended(k, since, unread)]
            if not waiting:
                break
            time.sleep(self.args.heartbeat)
        zone = self.me["zone"]
        request = self.args.request if self.args.slices > 1 else None
        what = f"{self.node.request_what(request)} (every slice)" if request else self.node.what
        other = (
            ""
            if request
            else claims.taken_by(
                self.storage, self.me, self.args.job_id, self.say, self.node, self.args.stale
            )
        )
        if other:  # `run --node` took it over (this job's claim was stale): it is theirs
            self.say(f"teardown: {what} is claimed by job {other} now: not deleting it")
            self.quietly(lambda: self.status.write(teardown=f"left to job {other}"))
            self.quietly(lambda: self.log.upload(force=True))
            return
        self.say(f"teardown: deleting {what} in {zone}")
        self.quietly(lambda: self.log.upload(force=True))  # before this VM goes away
        try:
            if request:
                op = self.node.delete_request(request, self.args.slices)
            else:
                op = self.node.delete()
            outcome = (op or {}).get("name", "already gone")
        except Exception as e:  # noqa: BLE001 - said in the log and the status
            outcome = f"failed: {e!r}"
            self.say(f"teardown {outcome}")
        if not request:
            self.quietly(lambda: claims.release(self.storage, self.me, self.args.job_id))
        self.quietly(lambda: self.status.write(teardown=outcome))
        self.quietly(lambda: self.log.upload(force=True))
