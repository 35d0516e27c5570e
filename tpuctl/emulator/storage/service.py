"""Cloud Storage (storage.googleapis.com): fake-gcs-server behind the emulator's proxy
(server.py, proxy.py) serves it; the emulator's state keeps what fake-gcs-server does
not keep of a bucket."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot


def _load(state: Any, config: dict[str, Any], kept: Any) -> None:
    state.buckets.update(kept or {})


# `state.buckets`: by bucket name, its lifecycle configuration and metageneration
# (proxy.py, lifecycle.py), kept over a restart
BUCKETS = Slot("buckets", dict, save=lambda state: state.buckets, load=_load)

SERVICE = Service("storage.googleapis.com", slots=(BUCKETS,))
