"""Cloud Monitoring's REST routes (its gRPC front and sampler start with the server)."""

from __future__ import annotations

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.monitoring import urls

SERVICE = Service("monitoring.googleapis.com", tuple(urls.ROUTES))
