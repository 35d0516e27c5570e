"""The services the emulated cloud serves, in the order a request's path is matched
against their routes and their transitions are applied. A new API is a package with a
`service.py` and a line here (`core/service.py` says what a service is)."""

from __future__ import annotations

from tpuctl.emulator.billing.service import SERVICE as BILLING
from tpuctl.emulator.compute.service import SERVICE as COMPUTE
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot
from tpuctl.emulator.iam.service import SERVICE as IAM
from tpuctl.emulator.monitoring.service import SERVICE as MONITORING
from tpuctl.emulator.quotas.service import SERVICE as QUOTAS
from tpuctl.emulator.registry.service import SERVICE as REGISTRY
from tpuctl.emulator.storage.service import SERVICE as STORAGE
from tpuctl.emulator.tpu.service import SERVICE as TPU

SERVICES: tuple[Service, ...] = (TPU, QUOTAS, IAM, MONITORING, COMPUTE, BILLING, STORAGE, REGISTRY)


def slots() -> list[Slot]:
    """Every service's slots of the state, in the services' order (`core.state.State`)."""
    return [slot for service in SERVICES for slot in service.slots]
