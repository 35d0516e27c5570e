"""Where a job's time and money went: the receipt at the end of `run`, kept in the
bucket (`tpuctl/jobs/<id>/receipt.json`) so that `tpuctl jobs JOB` shows it anywhere.

The client times the phases of the job's node, one after another, so they add up to the
node's life as `run` saw it:

    capacity     from the create call until the node existed (a queued request's wait,
                 which Google does not bill; a direct create's is about nothing)
    boot         until the node was READY (and the code staged meanwhile)
    start        until the agents ran on every worker (SSH, the agent's bundle)
    environment  the slowest worker's environment step (its own clock, from its status)
    script       the rest of the attempts: the setup command and the script
    recovery     after a preemption or a host maintenance, until the agents ran again
                 on the new node, or on the node back from its maintenance
    teardown     from the job's end until the node was confirmed gone (0: kept)

Each billed phase is priced at the list price of the node (tpuctl's price table, its
date said with every estimate; None where tpuctl has no price, e.g. TPU7x). A phase
nobody observed (a detached job's teardown: services/late_receipt.py) is unknown (None),
shown as such and left out of the sums, never guessed. The bucket is shared ground: a
receipt read there is shown, never acted on, and one that is not a receipt is left out.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl.agent import protocol
from tpuctl.errors import TpuctlError
from tpuctl.wording import printable

if TYPE_CHECKING:
    from tpuctl.cloud.storage import Bucket

VERSION = 1
NAME = "receipt.json"  # in the job's folder of the bucket
PHASES = ("capacity", "boot", "start", "environment", "script", "recovery", "teardown")
UNBILLED = ("capacity",)
SMALL_BELOW = 30.0  # percent TensorCore use: below it, a smaller type is worth a try


@dataclass
class Receipt:
    seconds: dict[str, float | None] = field(default_factory=dict)  # phase -> s (None: unknown)
    hourly: float | None = None  # USD per hour of the job's node(s), at list price
    util: float | None = None  # percent, the TensorCores' mean use while the job ran
    accelerator: str = ""
    price: str = ""  # the price it is costed at, and from when (cost.Rate.basis)
    restarts: dict[str, int] = field(default_factory=dict)  # reason -> restarts for it
    image: str = ""  # `run --image`: NAME@sha256:HEX, the digest every worker ran

    @property
    def billed(self) -> float:
        """The seconds of the billed phases that are known."""
        return sum(s or 0.0 for p, s in self.seconds.items() if p not in UNBILLED)

    @property
    def unknown(self) -> list[str]:
        """The phases nobody observed."""
        return [p for p in PHASES if p in self.seconds and self.seconds[p] is None]

    def cost(self, phase: str | None = None) -> float | None:
        """USD at list price, of one phase or of all that are billed and known."""
        seconds = self.billed if phase is None else self.seconds.get(phase, 0.0)
        if self.hourly is None or seconds is None:
            return None
        return 0.0 if phase in UNBILLED else self.hourly * seconds / 3600

    def advice(self) -> str | None:
        """One line where the job's use of its chips says something worth doing."""
        if self.util is not None and self.util < SMALL_BELOW:
            return (
                f"the TensorCores were {self.util:.0f}% busy on average (below "
                f"{SMALL_BELOW:.0f}%): the job waits on its input or host; profile it, or "
                "try a smaller type"
            )
        return None

    def lines(self) -> list[str]:
        """The receipt as the end of `run` and `tpuctl jobs JOB` print it."""
        parts = []
        shown = self._shown_seconds()
        for phase in PHASES:
            seconds = self.seconds.get(phase, 0.0)
            if seconds is None:
                parts.append(f"{phase} unknown")
            elif shown[phase] >= 1 or phase == "script":
                cost = self.cost(phase)
                price = "" if cost is None or phase in UNBILLED else f" {_money(cost)}"
                parts.append(f"{phase} {_duration(shown[phase])}{price}")
        total = self.cost()
        at = f"at {self.price}" if self.price else "at list price"
        money = "no public price" if total is None else f"{_money(total)} {at}"
        unknown = "".join(f" and {p} unknown" for p in self.unknown)
        lines = [
            f"receipt: {_duration(self.billed)} billed{unknown}, {money} "
            f"({self.accelerator}): " + ", ".join(parts)
        ]
        if self.restarts:
            said = [f"{n} {_restart(why)}{'s' * (n > 1)}" for why, n in self.restarts.items()]
            lines.append(f"receipt: {', '.join(said)}")
        if self.image:  # the digest's first 12 hex digits, as `docker images` shows an id
            lines.append(f"receipt: image {self.image[: self.image.find('@sha256:') + 20]}")
        if (advice := self.advice()) is not None:
            lines.append(f"receipt: {advice}")
        return lines

    def _shown_seconds(self) -> dict[str, int]:
        """Whole seconds of each known phase, the billed ones rounded so that they add up
        to the billed total as shown (largest remainder: 10.6 s three times is 11+11+10 s
        of 32 s, not 11 s thrice); an unbilled phase is rounded alone."""
        known = {p: s for p, s in self.seconds.items() if s is not None}
        shown = {p: int(round(s)) for p, s in known.items() if p in UNBILLED}
        billed = {p: s for p, s in known.items() if p not in UNBILLED}
        shown |= {p: math.floor(s) for p, s in billed.items()}
        left = int(round(self.billed)) - sum(shown[p] for p in billed)
        by_remainder = sorted(billed, key=lambda p: billed[p] - shown[p], reverse=True)
        for phase in by_remainder[: max(0, left)]:
            shown[phase] += 1
        return {p: shown.get(p, 0) for p in PHASES}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "accelerator": self.accelerator,
            "seconds": {p: _tenths(self.seconds.get(p, 0.0)) for p in PHASES},
            "unknown": self.unknown,
            "billedSeconds": round(self.billed, 1),
            "hourlyUsd": self.hourly,
            "price": self.price,
            "costUsd": None if self.cost() is None else round(self.cost() or 0.0, 4),
            "utilization": self.util,
            "advice": self.advice(),
            **({"restarts": dict(self.restarts)} if self.restarts else {}),
            **({"image": self.image} if self.image else {}),
        }


def _restart(why: str) -> str:
    """How a restart for `why` is named: "repair" (a node replaced because its TPU did
    not come up, services/run/repair.py) is one already; others are "<why> restart"."""
    return why if why == "repair" else f"{why} restart"


def of_marks(
    marks: dict[str, float],
    recovery: float,
    environment: float,
    hourly: float | None,
    accelerator: str,
    price: str = "",
) -> Receipt:
    """The receipt of a run from the times its phases ended (`begin`, `created`: the
    node's create time by the cloud's clock, `ready`, `started`, `ended`, `gone`; a mark
    missing is its phase taking nothing), the time its recoveries took and the slowest
    worker's environment step."""
    begin = marks.get("begin", 0.0)
    ready = max(begin, marks.get("ready", begin))
    created = min(max(begin, marks.get("created", begin)), ready)  # clocks may differ
    started = max(ready, marks.get("started", ready))
    ended = max(started, marks.get("ended", started))
    gone = max(ended, marks.get("gone", ended))
    attempts = ended - started
    env = min(max(0.0, environment), attempts)
    rec = min(max(0.0, recovery), attempts - env)
    seconds = {
        "capacity": created - begin,
        "boot": ready - created,
        "start": started - ready,
        "environment": env,
        "script": attempts - env - rec,
        "recovery": rec,
        "teardown": gone - ended,
    }
    # tenths of a second: what the bucket keeps, so another machine's figures are these
    tenths: dict[str, float | None] = {p: round(v, 1) for p, v in seconds.items()}
    return Receipt(tenths, hourly, None, accelerator, price)


def from_json(value: Any) -> Receipt | None:
    """A receipt read from the bucket, or None when it is not one (left out, not shown)."""
    if not isinstance(value, dict) or value.get("version") != VERSION:
        return None
    seconds = value.get("seconds")
    if not isinstance(seconds, dict):
        return None
    try:
        parsed = {p: _known(seconds.get(p, 0.0)) for p in PHASES}
        hourly = None if value.get("hourlyUsd") is None else _number(value["hourlyUsd"])
        util = None if value.get("utilization") is None else _number(value["utilization"])
    except (TypeError, ValueError):
        return None
    accelerator = value.get("accelerator")
    price = value.get("price")
    restarts = value.get("restarts")
    restarts = restarts if isinstance(restarts, dict) else {}
    image = value.get("image")
    return Receipt(
        parsed,
        hourly,
        util,
        accelerator if isinstance(accelerator, str) else "",
        printable(price[:200]) if isinstance(price, str) else "",  # shared ground
        {
            printable(str(why)[:40]): n
            for why, n in list(restarts.items())[:5]
            if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 1000
        },
        printable(image[:300]) if isinstance(image, str) and "@sha256:" in image else "",
    )


def _known(value: Any) -> float | None:
    return None if value is None else _number(value)


def _tenths(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def save(bucket: Bucket, job_id: str, receipt: Receipt) -> None:
    """Keep the receipt with the job (a failure to is no failure of the job's)."""
    with contextlib.suppress(TpuctlError):
        bucket.write_json(protocol.job_path(job_id, NAME), receipt.to_json())


def load(bucket: Bucket, job_id: str) -> Receipt | None:
    """The job's receipt (None: there is none, or what is there is not one)."""
    from tpuctl.services import records

    return records.parsed(bucket, protocol.job_path(job_id, NAME), "receipt", from_json)


def _number(value: Any) -> float:
    number = float(value)
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise ValueError(value)
    return number


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else "<$0.01"
