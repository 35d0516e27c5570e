"""The Cloud Billing Catalog API: public services and their SKUs (prices)."""

from __future__ import annotations

from tpuctl.emulator.billing import urls
from tpuctl.emulator.core.service import Service

SERVICE = Service("cloudbilling.googleapis.com", tuple(urls.ROUTES))
