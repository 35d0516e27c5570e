"""Endpoints and credentials: the one place that decides where calls go and as whom.

`TPUCTL_EMULATOR_HOST=host:port` switches every client tpuctl makes (and, through
the inherited environment, every process it starts) to the local emulator with
anonymous credentials. Nothing else in tpuctl reads that variable: commands,
services and tests get their clients from the factory (cloud/clients.py), which
asks here.

Google client libraries are imported inside the methods, so `import tpuctl`
and `tpuctl --help` stay fast.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.errors import CloudError, ConfigError

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

EMULATOR_ENV = "TPUCTL_EMULATOR_HOST"
_HOST_PORT = re.compile(
    r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):([0-9]{1,5})"
)
_ADC_HINT = "run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)"


def emulator_host(value: str) -> str:
    """`value` when it is HOST:PORT (a name, an IPv4 address or a [IPv6] one; a port
    1-65535), else a ConfigError naming the variable."""
    m = _HOST_PORT.fullmatch(value)
    if m is None or not 0 < int(m[1]) < 65536:
        shown = value if len(value) <= 64 else value[:61] + "..."
        raise ConfigError(
            f"invalid {EMULATOR_ENV} {shown!r}: expected HOST:PORT, e.g. 127.0.0.1:8470",
            hint=f"`tpuctl emulator start --detach` prints the line to paste; unset "
            f"{EMULATOR_ENV} to use Google Cloud",
        )
    return value


def _on_google_hardware() -> bool:
    """True on a GCE/TPU VM: the only place where the metadata-server probe makes sense."""
    try:
        return "Google" in Path("/sys/class/dmi/id/product_name").read_text()
    except OSError:
        return False


class Endpoints:
    """For one invocation of tpuctl: each API's endpoint (Google's, or the local
    emulator's), the credentials, and the account the calls are made as."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if env is None else env
        address = (self._env.get(EMULATOR_ENV) or "").strip()
        self._emulator = emulator_host(address) if address else None

    # -- where things are -------------------------------------------------
    @property
    def tpu_endpoint(self) -> str:
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://tpu.googleapis.com"

    @property
    def quotas_endpoint(self) -> str:
        """The Cloud Quotas API: Google's, or the emulator's (it serves both APIs)."""
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://cloudquotas.googleapis.com"

    @property
    def service_usage_endpoint(self) -> str:
        """The Service Usage API: Google's, or the emulator's (it serves it too)."""
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://serviceusage.googleapis.com"

    @property
    def monitoring_endpoint(self) -> str:
        """Cloud Monitoring's REST root: Google's, or the emulator's (it serves timeSeries.list
        over REST beside its gRPC front)."""
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://monitoring.googleapis.com"

    @property
    def billing_endpoint(self) -> str:
        """The Cloud Billing Catalog API: Google's, or the one the emulator names."""
        if not self._emulator:
            return "https://cloudbilling.googleapis.com"
        return str(self._emulator_config.get("billing_endpoint") or f"http://{self._emulator}")

    @property
    def storage_endpoint(self) -> str | None:
        """Cloud Storage's endpoint: the emulator's (from its status), or None for Google's."""
        if not self._emulator:
            return None
        config = self._emulator_config
        endpoint = config.get("storage_endpoint")
        if not endpoint:
            raise ConfigError(
                f"the local emulator at {self._emulator} serves no Cloud Storage",
                hint="restart it without --no-storage: `tpuctl emulator stop; "
                "tpuctl emulator start --detach`",
            )
        return str(endpoint)

    @property
    def oslogin_endpoint(self) -> str:
        """The Cloud OS Login API: Google's, or the emulator's (it serves a subset)."""
        if self._emulator:
            return f"http://{self._emulator}"
        return "https://oslogin.googleapis.com"

    @property
    def compute_endpoint(self) -> str:
        """Compute Engine's REST root (tpuctl reads only `projects.get` there)."""
        if self._emulator:
            return f"http://{self._emulator}/compute/v1"
        return "https://compute.googleapis.com/compute/v1"

    @property
    def tokeninfo_endpoint(self) -> str:
        """Google's OAuth 2.0 token-info endpoint (who a token is for), or the emulator's."""
        if self._emulator:
            return f"http://{self._emulator}/tokeninfo"
        from tpuctl.cloud.identity import TOKENINFO

        return TOKENINFO

    def registry_root(self, host: str) -> tuple[str, str]:
        """Where the Docker API of Artifact Registry's `host` (LOCATION-docker.pkg.dev) is:
        (base URL, prefix of image names under it). Google's: (`https://HOST`, ""); the
        emulator's registry port (its status's `registry_endpoint`), under which an image
        keeps its real name: (`http://ADDRESS`, `HOST/`)."""
        if not self._emulator:
            return f"https://{host}", ""
        endpoint = self._emulator_config.get("registry_endpoint")
        if not endpoint:
            raise ConfigError(
                f"the local emulator at {self._emulator} serves no Artifact Registry",
                hint="restart it with a tpuctl that does (`tpuctl emulator stop`, then start)",
            )
        return f"http://{endpoint}", f"{host}/"

    def registry_access_token(self) -> str:
        """The access token a registry's token endpoint takes as Basic
        `oauth2accesstoken:<token>`: the credentials' (refreshed when due). The emulator's
        credentials are anonymous; its registry takes any token it did not mint for a VM
        as its caller's, so a fixed one stands for the caller there."""
        if self._emulator:
            return "tpuctl-emulator-caller"
        credentials: Any = self.credentials
        if not credentials.valid:
            from google.auth.exceptions import RefreshError

            from tpuctl.cloud.session import Request

            try:
                credentials.refresh(Request())
            except RefreshError as e:
                raise ConfigError(
                    f"your Google Cloud credentials could not be refreshed: {e}", hint=_ADC_HINT
                ) from e
        return str(credentials.token)

    @property
    def emulator_address(self) -> str | None:
        """host:port of the emulator in use, or None against Google Cloud."""
        return self._emulator

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
        """The emulator's status (its endpoints and defaults); asked once per factory."""
        assert self._emulator
        url = f"http://{self._emulator}/_emulator/v1/status"
        import urllib.request  # here: a TAB completion from the cache never asks

        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                config = dict(json.load(resp))
        except (OSError, ValueError):
            config = {}
        if not config:
            self._check_listening()  # a closed port says so
            raise CloudError(
                f"cannot reach the local emulator at {self._emulator}",
                hint=self.unreachable_hint(),
            )
        return config

    def defaults(self) -> dict[str, str]:
        """Project and zone offered by the endpoint itself (the emulator's demo ones)."""
        if not self._emulator:
            return {}
        return dict(self._emulator_config.get("defaults") or {})

    def _check_listening(self) -> None:
        """A local emulator's port that refuses connections: nothing listens there, and
        retrying for seconds would not change it (a remote address is left to the retries:
        it may be restarting)."""
        assert self._emulator
        host, _, port = self._emulator.rpartition(":")
        host = host.strip("[]")
        if host != "localhost" and not host.startswith("127.") and host != "::1":
            return
        import socket

        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except ConnectionRefusedError:
            raise CloudError(
                f"cannot reach the local emulator at {self._emulator}: nothing listens on "
                f"port {port}",
                hint=self.unreachable_hint(),
            ) from None
        except OSError:
            return  # a timeout, no route: left to the calls and their retries

    # -- credentials, and who the calls are made as -------------------------------
    @cached_property
    def credentials(self) -> Credentials:
        if self._emulator:
            from google.auth.credentials import AnonymousCredentials

            self._check_listening()  # every client starts here: fail in a moment, not 15 s

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

    def has_credentials(self) -> bool:
        """Whether calls have credentials to go with (the emulator's anonymous ones count)."""
        try:
            self.credentials  # noqa: B018 - made (and kept) to see if they can be
        except ConfigError:
            return False
        return True

    @cached_property
    def _account(self) -> str | None:
        from tpuctl.cloud import identity

        def translated(e: BaseException) -> BaseException:
            from tpuctl.cloud.errors import translate

            where = f"Google's sign-in ({self.describe_endpoint()})"
            return translate(e, "your credentials", where, self.unreachable_hint())

        told = identity.email_of(
            self.credentials, self._authorized_session, self.tokeninfo_endpoint, translated
        )
        if told:
            return told
        from tpuctl.config import gcloud_properties

        return gcloud_properties(self._env).get("core/account") or None

    def account(self) -> str | None:
        """Who the calls are made as (an email), as the credentials tell it
        (cloud/identity.py: a service account's email, a VM's, a user's from the ID token
        or the token-info endpoint, which the emulator serves for its caller), else
        gcloud's `core/account`; None when neither says. Never `default`, never the local
        login name."""
        return self._account

    def required_account(self, needs: str) -> str:
        """`account()`, or a ConfigError saying that `needs` (e.g. "OS Login") cannot go
        on without it, and how to name it."""
        account = self.account()
        if not account:
            raise ConfigError(
                f"{needs} needs your account's email, and neither the credentials nor "
                "gcloud's configuration name it",
                hint="set it with `gcloud config set account YOU@example.com`",
            )
        return account

    def login_account(self) -> str:
        """The account OS Login is asked about: the one the calls are made as (gcloud's
        own TPU ssh uses it too)."""
        return self.required_account("OS Login")

    def _authorized_session(self) -> Any:
        """A session that calls with these credentials (made on use; cloud/session.py)."""
        from tpuctl.cloud.session import AuthorizedSession

        return AuthorizedSession(self.credentials)

    @property
    def ssh_port(self) -> int:
        """The workers' SSH port: 22 in the cloud, the emulator's own port under it."""
        if not self._emulator:
            return 22
        port = self._emulator_config.get("ssh_port")
        if not port:
            raise ConfigError(
                f"the emulator at {self._emulator} does not serve SSH to its workers",
                hint="restart it with a tpuctl that does (`tpuctl emulator stop`, then start)",
            )
        return int(port)
