"""OS Login as the emulated cloud has it: project metadata (Compute's `projects.get`
view), the OS Login API subset tpuctl and gcloud use (oslogin.googleapis.com v1: login
profile, key import, key delete), and which keys a worker accepts.

- Project metadata is config (`POST /_emulator/v1/config {"project_metadata":
  {"P": {"enable-oslogin": "TRUE", "gone": null}}}`, merged per key); Compute's
  `GET /compute/v1/projects/P` shows it as `commonInstanceMetadata.items`.
- OS Login applies to a node when its `enable-oslogin` says so, else the project's
  (the guest agent's reading: node first, then project). Values are read as the guest
  agent reads them, Go's `strconv.ParseBool` (1, t, T, TRUE, true, True; 0, f, F, FALSE,
  false, False); anything else is as if unset.
- Then a worker ignores `ssh-keys` and accepts, for the POSIX user name of a login
  profile, the keys imported into that profile and not expired (`expirationTimeUsec`,
  checked at each login against the emulator's clock), as long as the caller has
  `compute.instances.osLogin` (config `denied_permissions` can take it away).
- The POSIX user name derives from the email as Google's does (`alice@example.com` ->
  `alice_example_com`, at most 32 characters; a service account `sa_<uniqueId>`): see
  `posix_username`. A profile has no POSIX account until its first key import
  ("Default POSIX account information is set when no username and UID exist as part
  of the login profile", users.importSshPublicKey in the API reference).

Like `service_usage`, the API functions run with the facade's lock held.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.iam.access import permission_denied
from tpuctl.emulator.tpu.models import project_number

OS_LOGIN = "oslogin.googleapis.com"
LOGIN_PERMISSION = "compute.instances.osLogin"  # roles/compute.osLogin and osAdminLogin hold it
ENABLE_KEY = "enable-oslogin"
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_SA_DOMAIN = re.compile(r"@[^@]+\.gserviceaccount\.com$")
MAX_USERNAME = 32


# -- who is who ---------------------------------------------------------------------------
def unique_id(email: str) -> str:
    """A stable 21-digit id for an account, as Google's numeric account ids look."""
    digest = int.from_bytes(hashlib.sha256(email.lower().encode()).digest()[:9], "big")
    return "1" + f"{digest:020d}"[-20:]


def posix_username(email: str) -> str:
    """The user name OS Login gives an account: a service account `sa_<uniqueId>`; any
    other the whole email, lowercase, every character but a-z, 0-9 and `_` made `_`
    (`alice@example.com` -> `alice_example_com`), cut to 32 characters."""
    email = email.lower()
    if _SA_DOMAIN.search(email):
        return f"sa_{unique_id(email)}"
    return re.sub(r"[^a-z0-9_]", "_", email)[:MAX_USERNAME]


def _uid(email: str) -> str:
    # OS Login hands out large UIDs, well above the local accounts' range
    return str(1_000_000_000 + int(unique_id(email)) % 1_000_000_000)


def _bool(value: str | None) -> bool | None:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def applies(node_metadata: dict[str, str], project_metadata: dict[str, str]) -> bool:
    """Whether OS Login governs a node: its own `enable-oslogin`, else the project's."""
    own = _bool(node_metadata.get(ENABLE_KEY))
    if own is not None:
        return own
    return bool(_bool(project_metadata.get(ENABLE_KEY)))


# -- the config: project metadata --------------------------------------------------------
def validate_project_metadata(value: Any) -> None:
    """`{project: {key: value or null}}`, else INVALID_ARGUMENT."""
    ok = isinstance(value, dict) and all(
        isinstance(items, dict)
        and all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in items.items())
        for items in value.values()
    )
    if not ok:
        raise errors.invalid_argument(
            'project_metadata maps projects to {key: "value" or null}, e.g. '
            '{"tpuctl-demo": {"enable-oslogin": "TRUE"}}'
        )


def update_project_metadata(state: Any, value: dict[str, dict[str, str | None]]) -> None:
    """Merge `{project: {key: value or null}}` into the projects' metadata."""
    for project, items in value.items():
        current = state.project_metadata.setdefault(project, {})
        for key, item in items.items():
            if item is None:
                current.pop(key, None)
            else:
                current[key] = item
        if not current:
            del state.project_metadata[project]
    state.changed()


# -- Compute Engine: projects.get ---------------------------------------------------------
def get_project(state: Any, project: str) -> dict[str, Any]:
    """The Compute API's Project resource, the part gcloud and tpuctl read."""
    items = state.project_metadata.get(project, {})
    fingerprint = hashlib.sha256(repr(sorted(items.items())).encode()).digest()[:8]
    return {
        "kind": "compute#project",
        "id": str(project_number(project)),
        "name": project,
        "commonInstanceMetadata": {
            "kind": "compute#metadata",
            "fingerprint": base64.b64encode(fingerprint).decode(),
            "items": [{"key": k, "value": v} for k, v in sorted(items.items())],
        },
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}",
        # Compute Engine's default service account, which gcloud gives a new instance
        "defaultServiceAccount": f"{project_number(project)}-compute@developer.gserviceaccount.com",
    }


# -- the OS Login API ----------------------------------------------------------------------
def _user(state: Any, user: str) -> str:
    """The email of `users/{user}`; only the caller's own profile can be read or changed."""
    email = user.removeprefix("users/")
    if email.lower() != state.access.caller.lower():
        raise errors.ApiError(403, "PERMISSION_DENIED", "The caller does not have permission")
    return email.lower()


def _blob(key: str) -> bytes:
    fields = key.split()
    try:
        blob = base64.b64decode(fields[1], validate=True) if len(fields) >= 2 else b""
    except (binascii.Error, ValueError):
        blob = b""
    if not blob or not blob[4:].startswith(fields[0].encode()):
        raise errors.invalid_argument("Invalid SSH key", "ssh_public_key.key")
    return blob


def fingerprint(key: str) -> str:
    """The key's fingerprint as the API names it: SHA-256 of the key blob, in hex."""
    return hashlib.sha256(_blob(key)).hexdigest()


def _profile(state: Any, email: str) -> dict[str, Any]:
    profile = state.oslogin.get(email) or {}
    out: dict[str, Any] = {"name": email}
    account = profile.get("account")
    if account:
        username = posix_username(email)
        out["posixAccounts"] = [
            {
                "primary": True,
                "username": username,
                "uid": _uid(email),
                "gid": _uid(email),
                "homeDirectory": f"/home/{username}",
                "operatingSystemType": "LINUX",
                "accountId": account,
                "name": f"users/{email}/projects/{account}",
            }
        ]
    keys = profile.get("keys") or {}
    if keys:
        out["sshPublicKeys"] = {
            fp: {
                "key": k["key"],
                **({"expirationTimeUsec": k["expires"]} if k.get("expires") else {}),
                "fingerprint": fp,
                "name": f"users/{email}/sshPublicKeys/{fp}",
            }
            for fp, k in sorted(keys.items())
        }
    return out


def get_login_profile(state: Any, user: str, project_id: str = "", system_id: str = "") -> dict:
    return _profile(state, _user(state, user))


def import_ssh_public_key(state: Any, user: str, project_id: str, body: dict[str, Any]) -> dict:
    """Add (or renew) a key; the first import gives the profile its POSIX account."""
    email = _user(state, user)
    key = str(body.get("key") or "").strip()
    expires = str(body.get("expirationTimeUsec") or "")
    if expires and not expires.isdigit():
        raise errors.invalid_argument(
            "Invalid value at 'ssh_public_key.expiration_time_usec'", "expiration_time_usec"
        )
    fp = fingerprint(key)
    if project_id and LOGIN_PERMISSION in state.access.denied:
        raise permission_denied(OS_LOGIN, LOGIN_PERMISSION, f"projects/{project_id}")
    profile = state.oslogin.setdefault(email, {"keys": {}})
    profile["keys"][fp] = {"key": key, "expires": expires}
    profile.setdefault("account", project_id or state.defaults["project"])
    state.changed()
    return {"loginProfile": _profile(state, email)}


def delete_ssh_public_key(state: Any, user: str, fp: str) -> dict:
    email = _user(state, user)
    keys = (state.oslogin.get(email) or {}).get("keys") or {}
    if fp not in keys:
        raise errors.not_found(f"users/{email}/sshPublicKeys/{fp}")
    del keys[fp]
    state.changed()
    return {}


# -- what a worker accepts -----------------------------------------------------------------
Login = tuple[str, bytes, int | None]
"""(user name, key blob, expiry in microseconds since the epoch or None)."""


def ssh_keys(metadata: dict[str, str]) -> frozenset[Login]:
    """(user, key blob, None) from the `ssh-keys` metadata (`user:ssh-ed25519 AAAA... c`)."""
    pairs = set()
    for line in (metadata.get("ssh-keys") or "").splitlines():
        user, sep, key = line.strip().partition(":")
        fields = key.split()
        if not sep or not user or len(fields) < 2:
            continue
        try:
            pairs.add((user, base64.b64decode(fields[1], validate=True), None))
        except ValueError:
            continue
    return frozenset(pairs)


def logins(state: Any, node_metadata: dict[str, str], project: str) -> frozenset[Login]:
    """The keys a worker of a node in `project` accepts, and for whom."""
    if not applies(node_metadata, state.project_metadata.get(project, {})):
        return ssh_keys(node_metadata)
    if LOGIN_PERMISSION in state.access.denied:
        return frozenset()
    found = set()
    for email, profile in state.oslogin.items():
        if not profile.get("account"):
            continue
        for k in (profile.get("keys") or {}).values():
            expires = int(k["expires"]) if k.get("expires") else None
            found.add((posix_username(email), _blob(k["key"]), expires))
    return frozenset(found)


def to_state(state: Any) -> dict[str, Any]:
    return {"profiles": state.oslogin}


def load(state: Any, data: dict[str, Any]) -> None:
    state.oslogin = dict(data.get("profiles") or {})
