"""Cloud Quotas' calls on the backend (a mixin of `services.Backend`): quota infos
(quotas/limits.py) and the decision on a quota preference (quotas/preferences.py)."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.quotas import preferences as quota_prefs


class QuotaCalls(BackendCore):
    @locked
    def list_quota_infos(
        self, project: str, service: str, page_size: int = 0, page_token: str = ""
    ) -> dict:
        return self.state.quota.list_infos(project, service, page_size, page_token)

    @locked
    def get_quota_info(self, project: str, service: str, quota_id: str) -> dict:
        return self.state.quota.get_info(project, service, quota_id)

    @locked
    def decide_quota_preference(self, name: str, granted: Any) -> dict:
        return quota_prefs.decide(self.state, name, granted)
