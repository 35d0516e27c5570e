"""The boot guard: a node that `tpuctl run` created deletes itself when no agent of its
job has started by its start deadline (the client may have died before it started them).

Standard library only, Python 3.8+; it never imports tpuctl. It runs from the agent
bundle, started by the node's startup-script on every boot of every worker
(tpuctl.services.idle.startup_script):

    python3 BUNDLE guard [--poll SECONDS]

Only worker 0 guards (one delete per node); the others exit at once. What it reads:
- the node's labels, from the TPU API: `tpuctl-start-deadline` (unix seconds; no label,
  no guard), `tpuctl-created`, `tpuctl-job`, `tpuctl-keep`;
- the node's metadata: `tpuctl-bucket` (the job's bucket) and `tpuctl-attempt` (the
  attempt the node was created for: a node recreated after a preemption waits for an
  agent of the next attempt, not for the status its predecessor left);
- worker 0's status object in the bucket (docs/runner-internals.md): an agent that has
  written one for this attempt or a later one has started, and owns the node from then
  on (it deletes it when the job ends). A node stopped and started again later finds
  that status too, and is left alone.

The deadline is the later of the label and the boot plus the time the label allowed
from the create call (`deadline - created`): a node that boots late (a slow create, a
queued request that waited) still gives its agent the whole allowance. A status that
cannot be read (any error but "not found") decides nothing: the guard tries again, and
the node's `tpuctl-expires` label remains for `tpuctl gc`.
"""

from __future__ import annotations

import argparse
import json
import time

from .labels import ATTEMPT_ATTRIBUTE, BUCKET_ATTRIBUTE, CREATED, JOB, KEEP, START_DEADLINE, number
from .metadata import Token, identity, metadata
from .net import HttpError, Json
from .protocol import status_path
from .storage import Storage
from .tpu_api import tpu


def say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} guard: {text}", flush=True)


def _attribute(name: str) -> str:
    try:
        return metadata(f"instance/attributes/{name}").strip()
    except HttpError as e:
        if e.status == 404:
            return ""
        raise


class Guard:
    def __init__(self, name: str, token: Token, booted: float, poll: float | None) -> None:
        self.name, self.token, self.booted, self.poll = name, token, booted, poll

    def node(self) -> Json:
        return dict(json.loads(tpu(self.token, "GET", self.name)))

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
        say(f"job {job} attempt {attempt}: the node goes unless an agent starts by "
            f"{time.strftime('%H:%M:%SZ', time.gmtime(deadline))}")  # fmt: skip
        while True:
            started = self.started(storage, job, attempt)
            if started:
                say("an agent started: it owns the node now")
                return 0
            if started is False and time.time() >= deadline:
                return self.delete()
            time.sleep(poll)

    def delete(self) -> int:
        node = self.node()
        if str((node.get("labels") or {}).get(KEEP, "")).lower() == "true":
            say("no agent started by the deadline, but the node is kept (tpuctl-keep=true)")
            return 0
        say(f"no agent started by the deadline: deleting {self.name}")
        tpu(self.token, "DELETE", self.name)
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="guard", description=__doc__.split("\n")[0])
    parser.add_argument("--poll", type=float, help="seconds between looks at the bucket")
    args = parser.parse_args(argv)
    booted = time.time()
    me = identity()
    if int(me["worker"]) != 0:
        return 0
    name = f"projects/{me['project']}/locations/{me['zone']}/nodes/{me['node']}"
    guard = Guard(name, Token(), booted, args.poll)
    while True:
        try:
            return guard.run()
        except HttpError as e:
            if e.status == 404:
                say("the node is gone")
                return 0
            say(f"the TPU API failed, trying again: {e}")
        time.sleep(5.0)
