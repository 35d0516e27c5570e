"""OsLoginApi: the adapter over the Cloud OS Login API (oslogin.googleapis.com, v1, with
Google's `google-cloud-os-login` client) and what deciding on OS Login needs besides:
the account the calls are made as, and the project's metadata (Compute's `projects.get`).

The client, the account and the project's metadata are each got on first use, so a
node without OS Login costs no import and no call. Every call goes through `retry.call`
with the shared translation; a refused key import is told in one line with the role
that allows it (`ImportRefused`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tpuctl import google_apis
from tpuctl.errors import PermissionDeniedError
from tpuctl.google_apis import member

T = TypeVar("T")
TIMEOUT = 30.0
LOGIN_ROLE = "roles/compute.osLogin"
ADMIN_ROLE = "roles/compute.osAdminLogin"


class ImportRefused(PermissionDeniedError):
    """OS Login refused to take the key: the account may not log in to the project's VMs."""


@dataclass(frozen=True)
class LoginProfile:
    """What OS Login says of one account: its POSIX accounts and its SSH keys."""

    account: str
    posix: list[tuple[str, bool]] = field(default_factory=list)  # (username, primary)
    keys: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    """fingerprint -> (public key line, expiry in microseconds since the epoch or None)"""

    @property
    def username(self) -> str | None:
        """The primary POSIX account's user name, else the first one's (gcloud's rule,
        `command_lib/util/ssh/ssh.py` GetOsloginState); None without any."""
        for name, primary in self.posix:
            if primary:
                return name
        return self.posix[0][0] if self.posix else None

    def key(self, public_key: str) -> tuple[str, int | None] | None:
        """(fingerprint, expiry) of `public_key` in the profile (compared by type and blob)."""
        wanted = public_key.split()[:2]
        for fingerprint, (line, expires) in self.keys.items():
            if line.split()[:2] == wanted:
                return fingerprint, expires
        return None


class OsLoginApi:
    """An account's OS Login profile, and the project metadata that says if it applies."""

    def __init__(
        self,
        client: Callable[[], Any],
        account: Callable[[], str],
        project_metadata: Callable[[str], dict[str, str]],
        where: str = "the Cloud OS Login API",
        unreachable_hint: str = "",
    ) -> None:
        self._make_client = client
        self._client: Any = None
        self._account = account
        self._account_email: str | None = None
        self._project_metadata = project_metadata
        self._where = where
        self._hint = unreachable_hint

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def account(self) -> str:
        """The email of the account tpuctl's calls are made as (asked once)."""
        if self._account_email is None:
            self._account_email = self._account()
        return self._account_email

    def project_metadata(self, project: str) -> dict[str, str]:
        return self._project_metadata(project)

    def _call(self, subject: str, project: str, fn: Callable[[], T]) -> T:
        from tpuctl.cloud.errors import translate
        from tpuctl.cloud.retry import call

        return call(fn, lambda e: translate(e, subject, self._where, self._hint, project))

    def profile(self, project: str) -> LoginProfile:
        """The account's login profile as seen for `project`."""
        name = f"users/{self.account()}"
        got = self._call(
            f"the OS Login profile of {self.account()}",
            project,
            lambda: self.client.get_login_profile(
                request={"name": name, "project_id": project}, timeout=TIMEOUT
            ),
        )
        return self._profile(got)

    def import_key(self, project: str, public_key: str, expires_usec: int | None) -> LoginProfile:
        """Add `public_key` to the account's profile (renewing its expiry when it is
        there); the profile after. `ImportRefused` when OS Login will not take it."""
        from google.api_core import exceptions as gx

        from tpuctl.cloud.errors import translate
        from tpuctl.cloud.retry import call

        account = self.account()
        key: dict[str, Any] = {"key": public_key}
        if expires_usec is not None:
            key["expiration_time_usec"] = expires_usec
        request = {"parent": f"users/{account}", "ssh_public_key": key, "project_id": project}

        subject = f"importing your SSH key into OS Login ({account})"

        def refused(e: BaseException) -> BaseException:
            if isinstance(e, gx.Forbidden):
                return self._refused(e, account, project)
            return translate(e, subject, self._where, self._hint, project)

        def send() -> Any:
            return self.client.import_ssh_public_key(request=request, timeout=TIMEOUT)

        return self._profile(call(send, refused).login_profile)

    def _refused(self, e: BaseException, account: str, project: str) -> BaseException:
        from tpuctl.cloud.errors import server_message, setup_error

        setup = setup_error(e, project=project)
        if setup is not None and not isinstance(setup, PermissionDeniedError):
            return setup  # e.g. the OS Login API disabled in the project
        grant = google_apis.grant_command(project, LOGIN_ROLE, member(account))
        return ImportRefused(
            f"OS Login refused your SSH key for {account} in project {project} "
            f"({server_message(e).rstrip('.')}): the account needs {LOGIN_ROLE} "
            f"(or {ADMIN_ROLE} for sudo) on the project",
            permission="compute.instances.osLogin",
            hint=f"ask a project admin to run `{grant}`",
        )

    def _profile(self, got: Any) -> LoginProfile:
        posix = [(str(a.username), bool(a.primary)) for a in got.posix_accounts]
        keys = {
            str(fp): (str(k.key), int(k.expiration_time_usec) or None)
            for fp, k in got.ssh_public_keys.items()
        }
        return LoginProfile(self.account(), posix, keys)
