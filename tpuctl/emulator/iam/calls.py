"""IAM's calls on the backend (a mixin of `services.Backend`): who may log in to a
node's workers (iam/oslogin.py), the tokens minted for the VMs and the Cloud Storage
permissions the config denies (iam/access.py)."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.backend import BackendCore
from tpuctl.emulator.core.locking import locked
from tpuctl.emulator.iam import oslogin
from tpuctl.emulator.tpu.models import Node


class IamCalls(BackendCore):
    def logins(self, node: Node) -> frozenset[oslogin.Login]:
        """Who may log in to the workers of `node` with which key (ssh-keys, or OS Login)."""
        with self.lock:
            return oslogin.logins(self.state, node.metadata, node.project)

    @locked
    def mint_token(self, account: str, scopes: list[str], project: str) -> str:
        """A token for a worker of `project` whose node runs as `account` (metadata/server.py),
        saved: it outlives a restart (persistence.py)."""
        self.state.dirty = True
        return self.state.access.accounts.mint(account, scopes, project)

    def caller_storage_denied(self, permission: str) -> str | None:
        """The caller's account when the config denies it a Cloud Storage permission."""
        with self.lock:
            access = self.state.access
            return access.caller if permission in access.denied else None

    def storage_denied(self, principal: Any, permission: str) -> bool:
        """Whether the VM's account lacks a Cloud Storage permission."""
        with self.lock:
            return permission in self.state.access.accounts.denied(principal.account)
