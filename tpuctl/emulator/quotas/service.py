"""Cloud Quotas (cloudquotas.googleapis.com) and Service Usage, whose enables take time."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import Slot, configured
from tpuctl.emulator.quotas import service_usage, urls
from tpuctl.emulator.quotas.limits import CONFIG_KEYS, QuotaConfig

# `state.quota`: the limits, capacity and the Cloud Quotas API's switch (config)
LIMITS = configured(
    "quota",
    QuotaConfig,
    CONFIG_KEYS,
    load=lambda state, config, _: state.quota.load(config),
)


def _load_preferences(state: Any, config: dict[str, Any], kept: Any) -> None:
    state.quota_prefs.update({p["name"]: p for p in kept or []})


# `state.quota_prefs`: Cloud Quotas' quota preferences by name (preferences.py)
PREFERENCES = Slot(
    "quota_prefs",
    dict,
    file_key="quota_preferences",
    save=lambda state: list(state.quota_prefs.values()),
    load=_load_preferences,
)

SERVICE = Service(
    "cloudquotas.googleapis.com",
    tuple(urls.ROUTES),
    (service_usage.tick,),
    slots=(LIMITS, PREFERENCES),
)
