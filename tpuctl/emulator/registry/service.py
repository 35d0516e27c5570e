"""Artifact Registry: Docker repositories (REST) and the images pushed to them."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Front, Service
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.registry import urls
from tpuctl.emulator.registry.repositories import Registry


def _load(state: Any, config: dict[str, Any], saved: Any) -> None:
    state.registry.load(saved)


# `state.registry`: repositories and the images' tags and manifests (their bytes are
# files in the state dir, `blobs.py`); the file keeps them
REGISTRY = Slot(
    "registry",
    Registry,
    file_key="artifact_registry",
    save=lambda state: state.registry.to_state(),
    load=_load,
)


def _start(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    from tpuctl.emulator.registry.server import RegistryServer

    return RegistryServer(backend, host, port, state_dir, verbose).start()


# the Docker API of LOCATION-docker.pkg.dev on a port of its own: `registry_endpoint`
SERVICE = Service(
    apis.ARTIFACT_REGISTRY,
    tuple(urls.ROUTES),
    slots=(REGISTRY,),
    fronts=(Front("registry", _start),),
)
