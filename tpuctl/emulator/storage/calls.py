"""Cloud Storage's calls on the backend (a mixin of `services.Backend`): what the emulator
keeps of the buckets that fake-gcs-server does not (storage/proxy.py), and their
lifecycle rules applied at a time (storage/lifecycle.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.timestamps import rfc3339


class StorageCalls(BackendCore):
    # Cloud Storage beside the TPU API (set by EmulatorServer; None: not served)
    storage_endpoint: str | None = None
    clear_storage: Callable[[], None] | None = None
    # deletes what buckets' lifecycle rules remove at a time (storage.server.StorageServer)
    apply_lifecycle: Callable[[dict[str, Any], float], dict[str, list[str]]] | None = None

    def bucket_meta(self, bucket: str) -> dict[str, Any]:
        """What the emulator keeps of a bucket: `lifecycle` (storage/lifecycle.py) and
        `metageneration`, where they differ from a new bucket's (none, 1)."""
        with self.lock:
            return copy.deepcopy(self.state.buckets.get(bucket, {}))

    def set_bucket_meta(self, bucket: str, meta: dict[str, Any] | None) -> None:
        """Replace what is kept of a bucket (None: a new or deleted bucket's)."""
        kept = {k: v for k, v in (meta or {}).items() if v}
        with self.lock:
            if kept:
                self.state.buckets[bucket] = copy.deepcopy(kept)
            elif self.state.buckets.pop(bucket, None) is None:
                return
            self._save()

    def run_lifecycle(self, days: float | None = None) -> dict[str, Any]:
        """Apply every bucket's Delete rules as Cloud Storage would `days` from now (0:
        now), and say what went (control plane: `POST storage/lifecycle`)."""
        if days is not None and (
            isinstance(days, bool) or not isinstance(days, (int, float)) or days < 0
        ):
            raise errors.invalid_argument("days must be a number >= 0")
        if self.apply_lifecycle is None:
            raise errors.failed_precondition("this emulator serves no Cloud Storage")
        with self.lock:
            lifecycles = {
                name: meta["lifecycle"]
                for name, meta in self.state.buckets.items()
                if meta.get("lifecycle")
            }
            when = self.state.now() + float(days or 0) * 86400
        return {"at": rfc3339(when), "deleted": self.apply_lifecycle(lifecycles, when)}
