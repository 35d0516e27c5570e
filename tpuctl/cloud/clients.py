"""The client factory: the one place that decides endpoints and credentials.

`TPUCTL_EMULATOR_HOST=host:port` switches every client tpuctl makes (and, through
the inherited environment, every process it starts) to the local emulator with
anonymous credentials. Nothing else in tpuctl reads that variable: commands,
services and tests get their clients from here.

Google client libraries are imported inside the methods, so `import tpuctl`
and `tpuctl --help` stay fast.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.errors import ConfigError

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.cloud.tpu_v2 import TpuClient

    from tpuctl.cloud.ssh import SshApi
    from tpuctl.cloud.tpu import TpuApi

EMULATOR_ENV = "TPUCTL_EMULATOR_HOST"
_ADC_HINT = "run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)"


def _on_google_hardware() -> bool:
    """True on a GCE/TPU VM: the only place where the metadata-server probe makes sense."""
    try:
        return "Google" in Path("/sys/class/dmi/id/product_name").read_text()
    except OSError:
        return False


class ClientFactory:
    """Makes the cloud clients for one invocation of tpuctl."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if env is None else env
        self._emulator = (self._env.get(EMULATOR_ENV) or "").strip() or None

    # -- where things are -------------------------------------------------
    @property
    def tpu_endpoint(self) -> str:
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://tpu.googleapis.com"

    def describe_endpoint(self) -> str:
        """A phrase for messages: which cloud tpuctl is talking to."""
        if self._emulator:
            return f"the local emulator at {self._emulator}"
        return "Google Cloud"

    def unreachable_hint(self) -> str:
        if self._emulator:
            return (
                f"start it with `tpuctl emulator start --detach`, or unset {EMULATOR_ENV} "
                "to use Google Cloud"
            )
        return "check your network connection and proxy settings"

    @cached_property
    def _emulator_config(self) -> dict[str, Any]:
        assert self._emulator
        url = f"http://{self._emulator}/_emulator/v1/status"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return dict(json.load(resp))
        except (OSError, ValueError):
            return {}

    def defaults(self) -> dict[str, str]:
        """Project and zone offered by the endpoint itself (the emulator's demo ones)."""
        if not self._emulator:
            return {}
        return dict(self._emulator_config.get("defaults") or {})

    # -- credentials --------------------------------------------------------
    @cached_property
    def credentials(self) -> Credentials:
        if self._emulator:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials()
        if not _on_google_hardware():
            # Off Google's hardware the metadata-server probe only costs seconds.
            os.environ.setdefault("NO_GCE_CHECK", "true")
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            creds, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
        except DefaultCredentialsError as e:
            raise ConfigError("no Google Cloud credentials found", hint=_ADC_HINT) from e
        return creds

    # -- clients ------------------------------------------------------------
    def tpu_client(self) -> TpuClient:
        from google.api_core.client_options import ClientOptions
        from google.cloud import tpu_v2

        return tpu_v2.TpuClient(
            transport="rest",
            credentials=self.credentials,
            client_options=ClientOptions(api_endpoint=self.tpu_endpoint),
        )

    def tpu(self) -> TpuApi:
        from tpuctl.cloud.tpu import TpuApi

        return TpuApi(
            self.tpu_client(),
            where=self.describe_endpoint(),
            unreachable_hint=self.unreachable_hint(),
        )

    # -- SSH ----------------------------------------------------------------------
    @property
    def ssh_port(self) -> int:
        """The workers' SSH port: 22 in the cloud, the emulator's own port under it."""
        if not self._emulator:
            return 22
        if not self._emulator_config:
            raise ConfigError(
                f"cannot reach the local emulator at {self._emulator}",
                hint=self.unreachable_hint(),
            )
        port = self._emulator_config.get("ssh_port")
        if not port:
            raise ConfigError(
                f"the emulator at {self._emulator} does not serve SSH to its workers",
                hint="restart it with a tpuctl that does (`tpuctl emulator stop`, then start)",
            )
        return int(port)

    def ssh(self) -> SshApi:
        from tpuctl.cloud.ssh import SshApi

        return SshApi(self.ssh_port)
