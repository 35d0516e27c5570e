"""The boot guard: a node that `tpuctl run` created deletes itself when no agent of its
job has started by its start deadline (the client may have died before it started them).

Standard library only, Python 3.8+; it never imports tpuctl. It runs from the agent
bundle, started by the node's startup-script on every boot of every worker
(tpuctl.services.idle.startup_script):

    python3 BUNDLE guard [--poll SECONDS]

Only worker 0 guards (one delete per node); the others exit at once. What it reads:
- the node's labels, from the TPU API (on Compute Engine: the VM's own instance's):
  `tpuctl-start-deadline` (unix seconds; no label, no guard), `tpuctl-created`,
  `tpuctl-job`, `tpuctl-keep`;
- the node's metadata: `tpuctl-bucket` (the job's bucket) and `tpuctl-attempt` (the
  attempt the node was created for: a node recreated after a preemption waits for an
  agent of the next attempt, not for the status its predecessor left);
- worker 0's status object in the bucket (contributing/runner-internals.md): an agent that has
  written one for this attempt or a later one has started, and owns the node from then
  on (it deletes it when the job ends). A node stopped and started again later finds
  that status too, and is left alone.

The deadline is a lease the living client renews: `tpuctl run` rewrites
`jobs/<job>/lease.json` (claims.py) every third of its length (`seconds`, 90 by default)
until the agents start. Once the guard has seen a lease, the node goes when the guard has
seen no new generation of it for `seconds` (on this VM's clock: the client's is never
read) and no agent has started: a dead client's node goes within about a minute, and a
slow boot with a living client is never cut short. With no lease (a client that died
before it could write one), the label's deadline holds: the later of the label and the
boot plus the time the label allowed from the create call (`deadline - created`), so a
node that boots late (a slow create, a queued request that waited) still gives its agent
the whole allowance. A status that
cannot be read (any error but "not found") decides nothing: the guard tries again, and
the node's `tpuctl-expires` label remains for `tpuctl gc`.
"""

from __future__ import annotations

import argparse
import time

from . import target
from .claims import lease_path
from .labels import ATTEMPT_ATTRIBUTE, BUCKET_ATTRIBUTE, CREATED, JOB, KEEP, START_DEADLINE, number
from .metadata import Token, attribute, identity
from .net import HttpError, Json
from .protocol import status_path
from .storage import Storage
from .target import Target


def say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} guard: {text}", flush=True)


def _attribute(name: str) -> str:
    return attribute(name).strip()


class Guard:
    def __init__(self, target: Target, token: Token, booted: float, poll: float | None) -> None:
        self.target, self.token, self.booted, self.poll = target, token, booted, poll

    def node(self) -> Json:
        return self.target.read()

    def started(self, storage: Storage, job: str, attempt: int) -> bool | None:
        """Has an agent of `attempt` (or later) reported on worker 0? None: unknown."""
        try:
            status, _ = storage.read_json(status_path(job, 0))
        except (HttpError, ValueError) as e:
            say(f"cannot read the job's status, trying again: {e}")
            return None
        # An agent's status has its version; one the client wrote (a job it ended before
        # the agents started) does not.
        if status is None or not status.get("agent_version"):
            return False
        return int(status.get("attempt") or 1) >= attempt

    def lease(self, storage: Storage, job: str) -> tuple[int, float] | None:
        """The client's lease (its generation, its length in seconds), or None when the
        client has written none (or it cannot be read: the label's deadline holds)."""
        try:
            value, generation = storage.read_json(lease_path(job))
        except (HttpError, ValueError) as e:
            say(f"cannot read the client's lease, trying again: {e}")
            return None
        seconds = number((value or {}).get("seconds"))
        if not value or not generation or not seconds or seconds <= 0:
            return None
        return generation, seconds

    def run(self) -> int:
        labels = dict(self.node().get("labels") or {})
        deadline = number(labels.get(START_DEADLINE))
        job, bucket = labels.get(JOB, ""), _attribute(BUCKET_ATTRIBUTE)
        if deadline is None or not job or not bucket:
            say("no start deadline, job or bucket on this node: nothing to guard")
            return 0
        created = number(labels.get(CREATED)) or deadline
        deadline = max(deadline, self.booted + max(0.0, deadline - created))
        attempt = int(number(_attribute(ATTEMPT_ATTRIBUTE)) or 1)
        poll = self.poll or min(10.0, max(0.5, (deadline - self.booted) / 10))
        storage = Storage(self.token, bucket)
        say(
            f"job {job} attempt {attempt}: the node goes unless an agent starts by "
            f"{time.strftime('%H:%M:%SZ', time.gmtime(deadline))}, or as soon as its "
            "client stops renewing its lease"
        )
        seen: tuple[int, float] | None = None  # (the lease's generation, when seen here)
        while True:
            started = self.started(storage, job, attempt)
            if started:
                say("an agent started: it owns the node now")
                return 0
            # A lease renewed is a living client: the deadline is then its last renewal
            # as seen on this VM's clock (the client's is never read), plus the lease.
            lease, now = self.lease(storage, job), time.time()
            limit, why = deadline, "no agent started by the deadline"
            if lease is not None:
                if seen is None or seen[0] != lease[0]:
                    if seen is None:
                        say(f"the client renews a lease of {lease[1]:g}s")
                    seen = (lease[0], now)
                limit = seen[1] + lease[1]
                why = f"no agent started and the client's lease was not renewed for {lease[1]:g}s"
            if started is False and now >= limit:
                return self.delete(why)
            wait = min(poll, lease[1] / 3) if lease is not None else poll
            time.sleep(max(0.2, min(wait, limit - now)))

    def delete(self, why: str) -> int:
        node = self.node()
        if str((node.get("labels") or {}).get(KEEP, "")).lower() == "true":
            say(f"{why}, but the node is kept (tpuctl-keep=true)")
            return 0
        say(f"{why}: deleting {self.target.what}")
        self.target.delete()
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="guard", description=__doc__.split("\n")[0])
    parser.add_argument("--poll", type=float, help="seconds between looks at the bucket")
    target.add_arguments(parser)
    args = parser.parse_args(argv)
    booted = time.time()
    me = identity()
    if int(me["worker"]) != 0:
        return 0
    token = Token()
    guard = Guard(target.of(token, me, args.target), token, booted, args.poll)
    while True:
        try:
            return guard.run()
        except HttpError as e:
            if e.status == 404:
                say("the node is gone")
                return 0
            say(f"{guard.target.called} failed, trying again: {e}")
        time.sleep(5.0)
