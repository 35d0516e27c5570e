"""What the agent trusts of the bucket beyond the request: objects signed with the
client's signing key (`sign`, `signed`).

Every job VM that can write the bucket can rewrite any object in it, and the request's
digest (protocol.py) covers only what the client knew before the job ran. What the
agents themselves write for later jobs and attempts to use (an environment's index,
envs.py; the manifest of the outputs an attempt uploaded, outputs.py) is signed with a
key that never goes to the bucket: the client keeps it on the laptop
(tpuctl/services/run/signing.py) and gives it to each agent start over SSH, on its
standard input beside the `--env` values (protocol.SIGNING_KEY names it). The agent
keeps it in memory, out of the script's environment.
An object that does not carry a valid signature of this key was not written by an agent
of this client, and nothing of it is used.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from .protocol import canonical

SIGNATURE = "signature"  # the signed object's field that holds its signature


def signer(key: str) -> str:
    """A public name of the key (the environments of one key are its own: envkeys.py);
    nothing of the key can be learned from it."""
    return hashlib.sha256(b"tpuctl-signer\0" + key.encode()).hexdigest()[:16]


def sign(value: dict[str, Any], key: str) -> dict[str, Any]:
    """`value` with its signature (HMAC-SHA256 of its canonical JSON, protocol.canonical)."""
    body = {k: v for k, v in value.items() if k != SIGNATURE}
    return dict(body, **{SIGNATURE: _mac(body, key)})


def signed(value: Any, key: str) -> bool:
    """Does `value` carry a valid signature of `key`? (False without a key.)"""
    if not key or not isinstance(value, dict) or not isinstance(value.get(SIGNATURE), str):
        return False
    body = {k: v for k, v in value.items() if k != SIGNATURE}
    return hmac.compare_digest(str(value[SIGNATURE]), _mac(body, key))


def _mac(body: dict[str, Any], key: str) -> str:
    return hmac.new(key.encode(), canonical(body), hashlib.sha256).hexdigest()
