"""The Cloud Billing Catalog's SKU table as the control plane edits it (billing/control.py),
a mixin of `services.Backend`."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.billing import control as billing_control
from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked


class BillingCalls(BackendCore):
    @locked
    def billing_skus(self) -> dict:
        return billing_control.list_skus(self.state)

    @locked
    def billing_put_sku(self, sku: Any) -> dict:
        return billing_control.put_sku(self.state, sku)

    @locked
    def billing_delete_sku(self, sku_id: str) -> dict:
        return billing_control.delete_sku(self.state, sku_id)
