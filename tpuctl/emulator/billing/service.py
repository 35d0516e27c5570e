"""The Cloud Billing Catalog API: public services and their SKUs (prices)."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.billing import urls
from tpuctl.emulator.billing.catalog import CONFIG_KEYS, BillingCatalog
from tpuctl.emulator.core.service import Service
from tpuctl.emulator.core.slots import configured


def _load(state: Any, config: dict[str, Any], changes: Any) -> None:
    state.billing.load(config, changes or {})


# `state.billing`: the SKUs served and the switch; the file keeps the control plane's
# changes to the table
CATALOG = configured(
    "billing",
    BillingCatalog,
    CONFIG_KEYS,
    validate=BillingCatalog.validate,
    file_key="billing_skus",
    save=lambda state: state.billing.to_state(),
    load=_load,
)

SERVICE = Service("cloudbilling.googleapis.com", tuple(urls.ROUTES), slots=(CATALOG,))
