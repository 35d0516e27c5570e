"""Who the credentials are: the email of the account the calls are made as, told from the
credentials themselves, as Google's own tools tell it.

- A service account's key, an impersonated account, a VM's account: google-auth names it
  (`service_account_email`; for impersonation the target). A VM's credentials say
  `default` until refreshed: their refresh reads the metadata server's
  `instance/service-accounts/default/` (google-auth's `compute_engine.Credentials`
  `_retrieve_info`), which names the account by its email.
- A user's credentials (`gcloud auth application-default login`): google-auth keeps the
  `account` the file names, else the ID token the token endpoint answers a refresh with
  (gcloud's login asks for the `openid` and `email` scopes), whose `email` claim is the
  user's. gcloud reads its account from there too, decoding the ID token without checking
  its signature (`ExtractAndValidateAccount`, googlecloudsdk/command_lib/auth/auth_util.py):
  a token got straight from Google's token endpoint over TLS needs no signature check
  (OpenID Connect Core 1.0, 3.1.3.7, item 6).
- Else Google's token-info endpoint, asked about the access token: the token in the
  `Authorization` header of a POST to https://oauth2.googleapis.com/tokeninfo, as
  google-auth-library-nodejs's `OAuth2Client.getTokenInfo` asks it (never in the URL);
  it answers `email` for a token with the email scope.

The emulator serves the token-info endpoint too: a call without a token (its clients'
anonymous credentials) is its caller's, so the emulated path is this same one.

`default`, the login name or anything without an `@` is never an answer: None says the
credentials do not tell (the caller may ask gcloud's configuration, then give up).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

TOKENINFO = "https://oauth2.googleapis.com/tokeninfo"


def email_of(
    credentials: Any,
    session: Callable[[], Any],
    tokeninfo: str,
    translated: Callable[[BaseException], BaseException],
) -> str | None:
    """The account's email the credentials act as, or None when they do not tell.
    `session`: makes a session that calls with them (cloud/session.py); `tokeninfo`: the
    endpoint's URL; `translated`: Google's exceptions as tpuctl's (a refresh that fails is the
    credentials' problem, said as every call would say it)."""
    from tpuctl.cloud import retry

    email = _email(getattr(credentials, "service_account_email", None))
    if email:
        return email
    if not credentials.valid:  # a VM's names its account, a user's gets its ID token
        from tpuctl.cloud.session import Request

        retry.call(lambda: credentials.refresh(Request()), translated)
        email = _email(getattr(credentials, "service_account_email", None))
    email = email or _email(getattr(credentials, "account", None))
    email = email or _email(claims(getattr(credentials, "id_token", None)).get("email"))
    if email:
        return email
    answer = retry.call(lambda: _ask(session, tokeninfo), translated)
    return _email(answer.get("email"))


def _email(value: object) -> str | None:
    text = value.strip() if isinstance(value, str) else ""
    return text if "@" in text and text.lower() != "default" else None


def claims(id_token: object) -> dict[str, Any]:
    """The payload of a JWT (an OpenID Connect ID token), unverified; {} if it is none."""
    if not isinstance(id_token, str) or id_token.count(".") != 2:
        return {}
    payload = id_token.split(".")[1]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _ask(session: Callable[[], Any], url: str) -> dict[str, Any]:
    """The token-info endpoint's answer about the session's token; {} when it will not
    tell (a 4xx: a token it does not know, or one without the email scope). 5xx and 429
    raise, to be retried."""
    from tpuctl.cloud import rest

    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    try:
        answer = rest.send(session, "POST", url, headers=headers)
    except Exception as e:  # noqa: BLE001 - google-api-core's, sorted below
        from google.api_core import exceptions as gx

        if isinstance(e, gx.ClientError) and not isinstance(e, gx.TooManyRequests):
            return {}
        raise
    return answer if isinstance(answer, dict) else {}
