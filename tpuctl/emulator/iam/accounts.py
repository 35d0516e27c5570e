"""Who a call comes from, and what that principal may do: the VMs' service accounts.

A token minted by a worker's metadata server (metadata/server.py) is recorded here with the
node's service account, its scopes and the project: a call carrying it is that service
account's. Any other call (no bearer token, or one the emulator never minted, such as
the laptop's) is the caller's, whose permissions `access.Access` keeps. Minted tokens
outlive a restart (the state file keeps them, as Google's stay valid however its
servers restart), not a reset.

Config (control plane, `POST /_emulator/v1/config`), documented in docs/emulator.md:
`service_accounts: {email: {"denied_permissions": [...]}}` — the service accounts that
exist besides each project's default compute account, and the IAM permissions each
lacks. A call with a VM's token meets, in the order Google's front end checks:
- a scope that does not cover the API: the TPU API answers 403 "Request had insufficient
  authentication scopes." (ErrorInfo reason ACCESS_TOKEN_SCOPE_INSUFFICIENT, as public
  outputs of Google APIs show), Cloud Storage 403 "Provided scope(s) are not authorized"
  (reason `forbidden`, its older error shape: googleapis/google-cloud-cpp#7334);
- a permission the account lacks: the TPU API's `Permission 'tpu.nodes.delete' denied
  on '<resource>'` (access.permission_denied), Cloud Storage's "SA does not have
  storage.objects.create access to the Google Cloud Storage object. Permission
  'storage.objects.create' denied on resource (or it may not exist)." (reason
  `forbidden`; e.g. data-integrations/google-cloud#1503, spaceml-org/STARCOP#6).

Also served: Cloud Resource Manager's `projects.testIamPermissions` (the permissions the
caller, or the VM's account, holds out of those asked; it needs no permission itself)
and `projects.get` (the project's number), and IAM's `projects.serviceAccounts.get`
(which accounts exist): the subsets `tpuctl init` and the agent use; and OAuth 2.0's
token info (`POST /tokeninfo`, oauth2.googleapis.com's): who the token in the call's
`Authorization` header is for, a VM's account, or the caller for any other call.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.offerings import apis
from tpuctl.emulator.tpu.models import project_number

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
_AUTH = "https://www.googleapis.com/auth/"
# The scopes that let a token call each API; reading needs less than writing.
_READ_ONLY = _AUTH + "cloud-platform.read-only"
_STORAGE_WRITE = {
    CLOUD_PLATFORM,
    _AUTH + "devstorage.read_write",
    _AUTH + "devstorage.full_control",
}
_STORAGE_READ = _STORAGE_WRITE | {_READ_ONLY, _AUTH + "devstorage.read_only"}
MAX_TOKENS = 10_000  # minted tokens remembered (the oldest forgotten first)


@dataclass(frozen=True)
class Principal:
    """A VM's service account, as its token carries it."""

    account: str
    scopes: tuple[str, ...]
    project: str


def default_account(project: str) -> str:
    """The project's default compute service account, which a node gets when the create
    names none (the TPU v2 discovery document, ServiceAccount.email)."""
    return f"{project_number(project)}-compute@developer.gserviceaccount.com"


def scope_allows(scopes: tuple[str, ...], service: str, write: bool) -> bool:
    """Whether a token with `scopes` may call `service` (read or write)."""
    if service == apis.STORAGE:
        return bool(set(scopes) & (_STORAGE_WRITE if write else _STORAGE_READ))
    return CLOUD_PLATFORM in scopes or (not write and _READ_ONLY in scopes)


class ServiceAccounts:
    """The service accounts' permissions (config) and the tokens minted for them."""

    def __init__(self) -> None:
        self.accounts: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, Principal] = {}

    def to_config(self) -> dict[str, Any]:
        return {"service_accounts": copy.deepcopy(self.accounts)}

    def load(self, config: dict[str, Any]) -> None:
        self.accounts.update(copy.deepcopy(config.get("service_accounts") or {}))

    @staticmethod
    def validate(body: dict[str, Any]) -> None:
        value = body.get("service_accounts")
        if value is None:
            return
        ok = isinstance(value, dict) and all(
            isinstance(email, str)
            and "@" in email
            and isinstance(spec, dict)
            and set(spec) <= {"denied_permissions"}
            and isinstance(spec.get("denied_permissions", []), list)
            and all(isinstance(p, str) and p for p in spec.get("denied_permissions", []))
            for email, spec in value.items()
        )
        if not ok:
            raise errors.invalid_argument(
                'service_accounts maps emails to {"denied_permissions": [permission, ...]}'
            )

    def update(self, body: dict[str, Any]) -> None:
        """Replace the accounts' settings (checked first by `validate`)."""
        if "service_accounts" in body:
            self.accounts = copy.deepcopy(body["service_accounts"] or {})

    # -- accounts and tokens ---------------------------------------------------------
    def exists(self, project: str, email: str) -> bool:
        return email == default_account(project) or email in self.accounts

    def denied(self, account: str) -> set[str]:
        return set((self.accounts.get(account) or {}).get("denied_permissions") or [])

    def mint(self, account: str, scopes: list[str], project: str) -> str:
        token = f"ya29.emulated-{secrets.token_urlsafe(24)}"
        if len(self.tokens) >= MAX_TOKENS:
            self.tokens.pop(next(iter(self.tokens)))
        self.tokens[token] = Principal(account, tuple(scopes), project)
        return token

    def tokens_state(self) -> list[list[Any]]:
        """The minted tokens, for the state file: [token, account, scopes, project]."""
        return [[t, p.account, list(p.scopes), p.project] for t, p in self.tokens.items()]

    def load_tokens(self, saved: list[list[Any]]) -> None:
        for token, account, scopes, project in saved[-MAX_TOKENS:]:
            self.tokens[str(token)] = Principal(str(account), tuple(scopes), str(project))

    def principal(self, authorization: str | None) -> Principal | None:
        """The VM's account behind an `Authorization: Bearer` header; None: the caller."""
        kind, _, token = (authorization or "").partition(" ")
        return self.tokens.get(token.strip()) if kind.lower() == "bearer" else None


# -- errors ---------------------------------------------------------------------------
def scope_insufficient(service: str, method: str) -> errors.ApiError:
    info = {
        "@type": errors.ERROR_INFO_TYPE,
        "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
        "domain": "googleapis.com",
        "metadata": {"service": service, "method": method},
    }
    message = "Request had insufficient authentication scopes."
    return errors.ApiError(403, "PERMISSION_DENIED", message, [info])


def storage_error(message: str) -> dict[str, Any]:
    """Cloud Storage's JSON API error body: the older shape, `errors[]` with a reason."""
    item = {"message": message, "domain": "global", "reason": "forbidden"}
    return {"error": {"code": 403, "message": message, "errors": [item]}}


def storage_denied(account: str, permission: str) -> dict[str, Any]:
    what = "bucket" if permission.startswith("storage.buckets.") else "object"
    return storage_error(
        f"{account} does not have {permission} access to the Google Cloud Storage {what}. "
        f"Permission '{permission}' denied on resource (or it may not exist)."
    )


STORAGE_SCOPE_ERROR = "Provided scope(s) are not authorized"


# -- Cloud Resource Manager and IAM subsets (routes in core/urls.py) -----------------------
def test_iam_permissions(
    state: Any, project: str, body: dict[str, Any], principal: Principal | None
) -> dict[str, Any]:
    """`projects.testIamPermissions`: those of `permissions` the calling principal holds."""
    asked = body.get("permissions")
    if not isinstance(asked, list) or not all(isinstance(p, str) and p for p in asked):
        raise errors.invalid_argument("permissions must be a list of permission names")
    if len(asked) > 100:  # the API's own limit
        raise errors.invalid_argument("The number of permissions must not exceed 100.")
    denied = state.access.denied_to(principal)
    held = [p for p in asked if p not in denied]
    return {"permissions": held} if held else {}


def get_project(state: Any, project: str) -> dict[str, Any]:
    """Resource Manager's `projects.get` (v1): the project, with its number."""
    return {
        "projectNumber": project_number(project),
        "projectId": project,
        "lifecycleState": "ACTIVE",
        "name": project,
    }


def get_service_account(state: Any, project: str, email: str) -> dict[str, Any]:
    """`projects.serviceAccounts.get` (IAM): the account, or 404 as IAM words it."""
    name = f"projects/{project}/serviceAccounts/{email}"
    if not state.access.accounts.exists(project, email):
        raise errors.ApiError(404, "NOT_FOUND", f"Unknown service account: {email}")
    unique = str(10**20 + int(hashlib.sha256(email.encode()).hexdigest(), 16) % 10**20)
    default = email == default_account(project)
    return {
        "name": name,
        "projectId": project,
        "uniqueId": unique,
        "email": email,
        "displayName": "Compute Engine default service account" if default else email.split("@")[0],
        "oauth2ClientId": unique,
    }


def token_info(state: Any, principal: Principal | None) -> dict[str, Any]:
    """oauth2.googleapis.com's `tokeninfo` about the call's token: its account's email
    (a VM's, or the caller's for a token the emulator never minted, or none), as Google
    answers for a token with the email scope (strings, as Google's JSON has them); no
    email when the caller is unknown (config `caller: ""`), as for a token without it."""
    scopes: tuple[str, ...] = (CLOUD_PLATFORM,)
    email = state.access.caller
    if principal is not None:
        email, scopes = principal.account, principal.scopes
    elif email:
        scopes = ("openid", _AUTH + "userinfo.email", CLOUD_PLATFORM)
    told = {"email": email, "email_verified": "true"} if email else {}
    return {**told, "scope": " ".join(scopes), "expires_in": "3599", "access_type": "online"}
