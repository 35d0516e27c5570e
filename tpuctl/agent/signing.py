"""What the agent trusts of the bucket beyond the request: objects signed with the job's
own key (`sign`, `signed`), and environments the client vouched for (`Trust.vouched`).

Every job VM that can write the bucket can rewrite any object in it, and the request's
digest (protocol.py) covers only what the client knew before the job ran. A job's script
may also read anything on its node (its user often has sudo), the agent's memory
included: so nothing the VM holds may authorise anything beyond the job itself.

- The client's key stays on the laptop (tpuctl/services/run/signing.py). Each agent start
  gets, over SSH on its standard input beside the `--env` values (protocol.TRUST), a
  **job key** derived from it for that job alone (`job_key`: HMAC-SHA256 of the job id),
  the key's public name (`signer`, part of every environment key: envkeys.py), the
  keyed digest of the job's index settings (`indexes`) and the environments the client
  vouched for (`vouched`).
- The job key signs what the agents of the job write for the job's own later attempts
  and for the laptop: the manifests of its outputs (outputs.py) and the index of an
  environment it builds (envs.py), which the job's other workers use while it builds.
  Another job cannot make or check that signature.
- An environment built by another job is used only when the client vouched for it:
  `vouched` maps an environment key to the sha256 of the index's canonical JSON
  (`digest`) and the job that built it, as the laptop verified it after that job (it
  derives that job's key) and keeps it in a record signed with a key of its own that
  never leaves it (services/run/vouching.py).

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any, NamedTuple

from .protocol import canonical

SIGNATURE = "signature"  # the signed object's field that holds its signature
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def signer(key: str) -> str:
    """A public name of the client's key (the environments of one key are its own:
    envkeys.py); nothing of the key can be learned from it."""
    return hashlib.sha256(b"tpuctl-signer\0" + key.encode()).hexdigest()[:16]


def job_key(key: str, job_id: str) -> str:
    """The key of job `job_id` derived from the client's `key` (hex): what the job's
    agents sign with. Nothing of the client's key, nor of another job's key, can be
    learned from it."""
    return hmac.new(key.encode(), b"tpuctl-job\0" + job_id.encode(), hashlib.sha256).hexdigest()


def digest(value: Any) -> str:
    """The sha256 of a JSON value's canonical form (an index as the client vouches for it)."""
    return hashlib.sha256(canonical(value)).hexdigest()


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


class Trust(NamedTuple):
    """What the client gave the agent start for the job's trust (the module docstring)."""

    job_key: str = ""
    signer: str = ""
    indexes: str = ""  # the keyed digest of the job's index settings (envkeys.py)
    vouched: dict[str, dict[str, str]] = {}  # env key -> {"index": SHA256, "job": ID}

    @classmethod
    def of(cls, text: str) -> Trust:
        """The trust given on standard input (a JSON object as text); nothing when absent
        or malformed (then nothing of the bucket is trusted)."""
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            value = {}
        if not isinstance(value, dict):
            value = {}
        vouched = {}
        for key, entry in (value.get("vouched") or {}).items():
            if (
                isinstance(entry, dict)
                and _HEX64.match(str(key))
                and _HEX64.match(str(entry.get("index")))
                and isinstance(entry.get("job"), str)
            ):
                vouched[str(key)] = {"index": str(entry["index"]), "job": entry["job"]}
        return cls(
            str(value.get("job_key") or ""),
            str(value.get("signer") or ""),
            str(value.get("indexes") or ""),
            vouched,
        )
