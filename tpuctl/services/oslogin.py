"""OS Login: whether it governs a node, and then who tpuctl logs in as.

As gcloud decides it (`googlecloudsdk/command_lib/compute/tpus/tpu_vm/ssh.py`
`TpuHasOsLoginEnabled`, then `command_lib/util/ssh/ssh.py` `GetOsloginState` and
`FeatureEnabledInMetadata`, gcloud 528): the node's `enable-oslogin` metadata decides
when it is set, else the project's (Compute's `commonInstanceMetadata`). gcloud reads
"true" in any case as on; the VM's guest agent parses the value with Go's
`strconv.ParseBool`, so `1` and `t` turn it on there too: tpuctl takes either reading
as on, since the VM is what refuses a key. When OS Login applies, the `ssh-keys`
metadata is ignored by the VM: tpuctl imports its public key into the account's OS
Login profile (with an expiry, `KEY_TTL`, renewed once less than half is left; gcloud
sets none unless asked with --ssh-key-expire-after) and logs in as the profile's
primary POSIX user name (e.g. `alice_example_com`).

What tpuctl cannot do: log in where OS Login also asks for 2-step verification
(`enable-oslogin-2fa`) other than in an interactive shell (OpenSSH asks the code), nor
where it asks for security keys (`enable-oslogin-sk`) or certificates
(`enable-oslogin-certificates`); those are refused at once, with gcloud as the way in.
The organisation policy `compute.requireOsLogin` is not read (it needs organisation
rights): where it is enforced without the metadata saying so, set
`enable-oslogin=TRUE` on the project (it agrees with the policy) so tpuctl knows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuctl.errors import AccessDeniedError, CloudError, ConfigError, ServiceDisabledError

if TYPE_CHECKING:
    from tpuctl.cloud.oslogin import OsLoginApi
    from tpuctl.models import Node

ENABLE = "enable-oslogin"
TWO_FACTOR = "enable-oslogin-2fa"
SECURITY_KEYS = "enable-oslogin-sk"
CERTIFICATES = "enable-oslogin-certificates"
KEY_TTL = 24 * 3600.0  # seconds an imported key stays valid
_ON = {"true", "1", "t"}
_OFF = {"false", "0", "f"}


@dataclass(frozen=True)
class Login:
    """Who tpuctl logs in as on one node."""

    user: str | None = None  # the profile's POSIX user; None: no OS Login, `ssh-keys` rules
    imported: bool = False  # the key was just imported (or renewed) into the profile
    unsure: str = ""  # why the project's metadata could not be read, when it could not


def flag(value: str | None) -> bool | None:
    """A metadata switch: True, False, or None when unset (or not a boolean at all)."""
    if value is None:
        return None
    text = value.strip().lower()
    return True if text in _ON else False if text in _OFF else None


class Settings:
    """The OS Login switches of one node: its own metadata first, then its project's
    (read once, and only when the node leaves a switch unset)."""

    def __init__(self, node: Node, project_metadata: Callable[[str], dict[str, str]]) -> None:
        self._node = node
        self._read = project_metadata
        self._project: dict[str, str] | None = None
        self.unreadable = ""  # why the project's metadata could not be read, if so

    def _project_metadata(self) -> dict[str, str]:
        if self._project is None:
            try:
                self._project = self._read(self._node.project)
            except (AccessDeniedError, ServiceDisabledError) as e:
                # A TPU user often may not read Compute's project (roles/tpu.admin has
                # no compute.projects.get): go by the node's metadata alone.
                self.unreadable = e.message
                self._project = {}
        return self._project

    def on(self, key: str) -> bool:
        own = flag(self._node.metadata.get(key))
        if own is not None:
            return own
        return bool(flag(self._project_metadata().get(key)))


def check_supported(node: Node, settings: Settings, interactive: bool) -> None:
    """Refuse, in one line, the OS Login setups tpuctl cannot log in to."""
    for key, what in ((SECURITY_KEYS, "security keys"), (CERTIFICATES, "SSH certificates")):
        if settings.on(key):
            raise ConfigError(
                f"node {node.name} requires OS Login {what} ({key}=TRUE): tpuctl cannot "
                "log in with them",
                hint=f"use `gcloud compute tpus tpu-vm ssh {node.name} --zone {node.zone}`",
            )
    if settings.on(TWO_FACTOR) and not interactive:
        raise ConfigError(
            f"node {node.name} requires OS Login 2-step verification ({TWO_FACTOR}=TRUE): "
            "tpuctl can only open an interactive shell there, not run commands, copy files "
            "or start jobs",
            hint=f"`tpuctl ssh {node.name}` (OpenSSH asks for the code)",
        )


def login_user(
    oslogin: OsLoginApi | None,
    node: Node,
    public_key: str,
    interactive: bool = False,
    now: float | None = None,
) -> Login:
    """Whether OS Login governs the node, and if so the POSIX user name to log in as,
    after making sure the account's profile holds `public_key`, valid for a while."""
    if oslogin is None:
        if flag(node.metadata.get(ENABLE)):
            raise ConfigError(
                f"node {node.name} uses OS Login ({ENABLE}), and this SSH client was made "
                "without access to it"
            )
        return Login()
    settings = Settings(node, oslogin.project_metadata)
    if not settings.on(ENABLE):
        return Login(unsure=settings.unreadable)
    check_supported(node, settings, interactive)
    now = time.time() if now is None else now
    profile = oslogin.profile(node.project)
    found = profile.key(public_key)
    renew_by = int((now + KEY_TTL / 2) * 1_000_000)
    fresh = found is not None and (found[1] is None or found[1] > renew_by)
    imported = False
    if not fresh or profile.username is None:
        expires = int((now + KEY_TTL) * 1_000_000)
        profile = oslogin.import_key(node.project, public_key, expires)
        imported = True
    if not profile.username:
        raise CloudError(
            f"OS Login gave {profile.account} no POSIX account in project {node.project}",
            hint="`gcloud compute os-login describe-profile` shows the profile",
        )
    return Login(profile.username, imported, settings.unreadable)
