"""Cloud Quotas (cloudquotas.googleapis.com) and Service Usage, whose enables take time."""

from __future__ import annotations

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.quotas import service_usage, urls

SERVICE = Service("cloudquotas.googleapis.com", tuple(urls.ROUTES), (service_usage.tick,))
