"""What a TPU chip costs per hour, where: Google's list prices, read from the Cloud
Billing catalog (cloud/billing.py) as the caller's credentials allow, kept a day in the
user's cache folder; tpuctl's built-in table (catalog/prices.py) when the catalog
cannot be read, said so with the reason.

The book is read once per command, in the background from the command's start
(`prefetch`), and waited for at most WAIT_SECONDS where a price is shown (`book`). A
catalog that cannot be read is not asked again for an hour (the cache says why), unless
`tpuctl prices --refresh`. The cache is keyed by the catalog's endpoint, so prices read
from one endpoint are never shown for another.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tpuctl.catalog import prices as builtin
from tpuctl.cloud.billing import TpuRate

CACHE_SECONDS = 24 * 3600  # prices read from the catalog are used for a day
RETRY_SECONDS = 3600  # a catalog that could not be read is asked again after an hour
WAIT_SECONDS = 15.0  # the longest a command waits for the catalog before the table
CACHE_LIMIT = 8 * 1024 * 1024  # bytes of the cache file read at most
VERSION = 1
LIVE = "Cloud Billing"
TABLE = "built-in table"


@dataclass(frozen=True)
class Price:
    """USD per chip-hour of one generation and kind of use, and where it comes from."""

    usd_per_chip_hour: float
    source: str  # LIVE or TABLE
    as_of: str  # the date it took effect (the catalog) or the table's month
    region: str  # the region the price is of ("" when the table has only another's)
    sku: str = ""


@dataclass
class Book:
    """The prices in force for this command."""

    rates: list[TpuRate] = field(default_factory=list)
    source: str = TABLE
    fetched: float | None = None  # when the catalog was read (LIVE)
    reason: str = ""  # why the catalog was not read now (TABLE, or a stale LIVE)

    def price(self, generation: str, pod: bool, spot: bool, region: str) -> Price | None:
        """The price of a chip of `generation` in `region`: the catalog's for that
        region, else the built-in table's, else the catalog's or the table's of the
        generation's first region (`region` then names that one); None when neither has
        one (TPU7x; a spot price nobody publishes)."""
        pod = pod and generation in ("v2", "v3")
        live = [
            r for r in self.rates if r.generation == generation and r.spot == spot and r.pod == pod
        ]
        rows = [r for r in builtin.ROWS if r.generation == generation and r.pod == pod]
        for r in live:
            if region in r.regions:
                return Price(r.usd_per_chip_hour, LIVE, _day(r.effective), region, r.sku)
        for row in rows:
            value = row.spot if spot else row.on_demand
            if region in row.regions and value is not None:
                return Price(value, TABLE, builtin.AS_OF, region)
        for r in live:
            return Price(r.usd_per_chip_hour, LIVE, _day(r.effective), r.regions[0], r.sku)
        for row in rows:
            value = row.spot if spot else row.on_demand
            if value is not None:
                return Price(value, TABLE, builtin.AS_OF, row.regions[0])
        return None

    def line(self, read: bool = False) -> str:
        """Where this book's prices come from, for every message that shows one (with
        `read`: when the catalog was read, as `tpuctl prices` says)."""
        if self.source == LIVE:
            dates = sorted({_day(r.effective) for r in self.rates if r.effective})
            since = f" of {dates[-1]}" if dates else ""
            when = f" (read {_day_of(self.fetched)})" if read else ""
            stale = f"; could not read them again: {self.reason}" if self.reason else ""
            return f"Cloud Billing prices{since}{when}{stale}"
        why = f" (Cloud Billing not readable: {self.reason})" if self.reason else ""
        return f"tpuctl's built-in table of {builtin.AS_OF}{why}"

    def generations(self) -> set[str]:
        return {r.generation for r in self.rates} | {r.generation for r in builtin.ROWS}


def _day(stamp: str) -> str:
    return stamp[:10]


def _day_of(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d")


# -- the cache file ---------------------------------------------------------------------
def cache_path(endpoint: str) -> Path:
    from tpuctl.config import cache_dir

    key = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
    return cache_dir() / f"prices-{key}.json"


def _load(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(CACHE_LIMIT + 1)[:CACHE_LIMIT])
        rates = [TpuRate(**{**r, "regions": tuple(r["regions"])}) for r in data.get("rates", [])]
        data["rates"] = rates
        return data if data.get("version") == VERSION else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # absent or not ours: read the catalog again


def _save(path: Path, data: dict) -> None:
    payload = dict(data, version=VERSION, rates=[asdict(r) for r in data.get("rates", [])])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs a read next time, nothing more


# -- reading the catalog ----------------------------------------------------------------
def read(refresh: bool = False, now: float | None = None) -> Book:
    """The book for this command: the cache while it is fresh, else the catalog (saved
    to the cache), else the stale cache or the built-in table with the reason."""
    from tpuctl.cloud.clients import ClientFactory
    from tpuctl.errors import TpuctlError

    now = time.time() if now is None else now
    try:
        factory = ClientFactory()
        path = cache_path(factory.billing_endpoint)
    except TpuctlError as e:
        return Book(reason=e.message)
    cached = _load(path) or {}
    fetched = cached.get("fetched")
    failed = cached.get("failed") or {}
    if not refresh and fetched and now - fetched < CACHE_SECONDS and cached["rates"]:
        return Book(cached["rates"], LIVE, fetched)
    if not refresh and failed and now - float(failed.get("at", 0)) < RETRY_SECONDS:
        return _stale(cached, str(failed.get("reason") or "unknown"))
    try:
        rates = factory.billing_catalog().tpu_rates()
    except TpuctlError as e:
        reason = e.message
    except Exception as e:  # noqa: BLE001 - credentials and transport, said in one line
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        _save(path, {"fetched": now, "rates": rates})
        return Book(rates, LIVE, now)
    _save(path, dict(cached, failed={"at": now, "reason": reason}))
    return _stale(cached, reason)


def _stale(cached: dict, reason: str) -> Book:
    if cached.get("rates") and cached.get("fetched"):
        return Book(cached["rates"], LIVE, cached["fetched"], reason)
    return Book(reason=reason)


_lock = threading.Lock()
_thread: threading.Thread | None = None
_book: Book | None = None
_round = 0  # a book read before the last `forget` is not this command's


def prefetch() -> None:
    """Start reading the book in the background (once per command)."""
    global _thread
    with _lock:
        if _thread is not None or _book is not None:
            return
        _thread = threading.Thread(target=_fill, args=(_round,), name="tpuctl-prices")
        _thread.daemon = True
        _thread.start()


def _fill(round_: int) -> None:
    global _book
    found = read()
    with _lock:
        if _book is None and round_ == _round:
            _book = found


def book(wait: float = WAIT_SECONDS) -> Book:
    """The book in force, read now if no command started it; after `wait` seconds of a
    catalog that does not answer, the cache or the built-in table, said so."""
    prefetch()
    thread = _thread
    if thread is not None:
        thread.join(wait)
    with _lock:
        if _book is not None:
            return _book
    return Book(reason=f"no answer in {wait:.0f}s")


def refresh() -> Book:
    """Read the catalog now, whatever the cache holds (`tpuctl prices --refresh`)."""
    global _book
    found = read(refresh=True)
    with _lock:
        _book = found
    return found


def forget() -> None:
    """Drop this process's book (tests; a long-lived process that wants new prices)."""
    global _book, _thread, _round
    with _lock:
        _book, _thread, _round = None, None, _round + 1


def region_of(zone: str) -> str:
    """`us-central1-a` -> `us-central1` (a region passes unchanged)."""
    head, _, tail = zone.rpartition("-")
    return head if head and len(tail) == 1 else zone
