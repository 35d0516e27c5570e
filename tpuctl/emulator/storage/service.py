"""Cloud Storage (storage.googleapis.com): fake-gcs-server behind the emulator's proxy
(server.py, proxy.py) serves it; the emulator's state keeps what fake-gcs-server does
not keep of a bucket."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tpuctl.emulator.core.service import Front, Service
from tpuctl.emulator.core.slots import Slot


def _load(state: Any, config: dict[str, Any], kept: Any) -> None:
    state.buckets.update(kept or {})


# `state.buckets`: by bucket name, its lifecycle configuration and metageneration
# (proxy.py, lifecycle.py), kept over a restart
BUCKETS = Slot("buckets", dict, save=lambda state: state.buckets, load=_load)


def _start_storage(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    """fake-gcs-server (a child process): objects kept beside the nodes, on a network of
    its own that only the proxy reaches (private_net.py); on 127.0.0.1 only where none
    can be made and worker commands run unconfined. Raises StorageError if it cannot."""
    from tpuctl.emulator.storage.server import StorageServer

    sandbox = backend.workers.sandbox
    root = Path(state_dir) / "storage" if state_dir else None
    storage = StorageServer(
        host, 0, root, preferred=port, bwrap=sandbox.bwrap, open_fallback=sandbox.unconfined
    )
    storage.start()
    if not storage.private:
        print(
            f"warning: Cloud Storage's server listens on {storage.target}, where "
            f"web pages and workers reach it unchecked ({storage.private_problem})",
            file=sys.stderr,
        )
    backend.clear_storage = storage.clear
    backend.apply_lifecycle = storage.apply_lifecycle
    return storage


def _start_proxy(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    """On the port it had before, where free: a worker's agent outlives a restart. Every
    client goes through it: it refuses what a web page sends, checks the workers'
    tokens, and keeps the buckets' lifecycle rules that fake-gcs-server drops."""
    storage = getattr(backend.fronts, "storage", None)
    if storage is None:  # Cloud Storage is off
        return None
    from tpuctl.emulator.storage.proxy import StorageProxy

    try:
        proxy = StorageProxy(host, storage, backend, port)
    except OSError:  # its port taken since it was found free: another one
        proxy = StorageProxy(host, storage, backend, 0)
    started = proxy.start()
    backend.storage_endpoint = proxy.url  # the status's `storage_endpoint`
    return started


# both under the HTTP server: a request may reach them until it stopped
SERVICE = Service(
    "storage.googleapis.com",
    slots=(BUCKETS,),
    fronts=(
        Front("storage", _start_storage, "under", False, lambda storage: storage.open_port),
        Front("storage_proxy", _start_proxy, "under", False),
    ),
)
