"""The services the emulated cloud serves, in the order a request's path is matched
against their routes and their transitions are applied, and the backend their calls make
(each service's `calls.py`, a mixin of `core.backend.BackendCore`). A new API is a
package with a `service.py` and a line here (`core/service.py` says what a service is)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tpuctl.emulator.billing.calls import BillingCalls
from tpuctl.emulator.billing.service import SERVICE as BILLING
from tpuctl.emulator.compute.calls import ComputeCalls
from tpuctl.emulator.compute.service import SERVICE as COMPUTE
from tpuctl.emulator.control.calls import ControlCalls
from tpuctl.emulator.control.service import CONTROL
from tpuctl.emulator.core.service import Front, Prefix, Service
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.iam.calls import IamCalls
from tpuctl.emulator.iam.service import SERVICE as IAM
from tpuctl.emulator.metadata.service import METADATA
from tpuctl.emulator.monitoring.calls import MonitoringCalls
from tpuctl.emulator.monitoring.service import SERVICE as MONITORING
from tpuctl.emulator.quotas.calls import QuotaCalls
from tpuctl.emulator.quotas.service import SERVICE as QUOTAS
from tpuctl.emulator.registry.service import SERVICE as REGISTRY
from tpuctl.emulator.storage.calls import StorageCalls
from tpuctl.emulator.storage.service import SERVICE as STORAGE
from tpuctl.emulator.tpu.calls import TpuCalls
from tpuctl.emulator.tpu.service import SERVICE as TPU
from tpuctl.emulator.workers.calls import WorkerCalls
from tpuctl.emulator.workers.sandbox import Sandbox
from tpuctl.emulator.workers.service import SSH

SERVICES: tuple[Service, ...] = (TPU, QUOTAS, IAM, MONITORING, COMPUTE, BILLING, STORAGE, REGISTRY)

# The services' own ports (`core.service.Front`) in the order the server starts them
# (`core/server.py`) and the ports file lists them: Cloud Storage under the HTTP server,
# the gRPC fronts and the registry beside it, the workers' SSH once it serves.
FRONTS: tuple[Front, ...] = (
    *STORAGE.fronts,
    *MONITORING.fronts,
    *TPU.fronts,
    *REGISTRY.fronts,
    SSH,
)

# The paths answered whole (`core.service.Prefix`): the services' own, the workers'
# metadata server and the emulator's control plane.
PREFIXES: tuple[Prefix, ...] = (*(p for s in SERVICES for p in s.prefixes), METADATA, CONTROL)


def slots() -> list[Slot]:
    """Every service's slots of the state, in the services' order (`core.state.State`)."""
    return [slot for service in SERVICES for slot in service.slots]


class Backend(
    TpuCalls,
    QuotaCalls,
    IamCalls,
    MonitoringCalls,
    ComputeCalls,
    BillingCalls,
    StorageCalls,
    WorkerCalls,
    ControlCalls,
):
    """Holds every node and operation of every project and zone, and the rules: the
    services' calls over one lock (`core/backend.py`)."""

    def __init__(
        self,
        state_dir: Path | str | None = None,
        clock: Callable[[], float] = time.time,
        sandbox: Sandbox | None = None,
        unconfined: bool | None = None,
    ):
        """`sandbox`: how the workers' commands run (None: a `Sandbox(unconfined)`, see
        workers/sandbox.py)."""
        super().__init__(SERVICES, state_dir, clock)
        self._start_workers(sandbox if sandbox is not None else Sandbox(unconfined=unconfined))
        self._load()
        self._start_monitoring()
