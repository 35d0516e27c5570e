"""IAM: service accounts, OS Login, the Policy Troubleshooter."""

from __future__ import annotations

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.iam import urls

SERVICE = Service("iam.googleapis.com", tuple(urls.ROUTES))
