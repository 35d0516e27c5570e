"""The client's signing key (tpuctl/agent/signing.py): the root of what the laptop trusts
in the bucket. Each job's agents get a key derived from it for that job alone
(`job_key`), with which they sign what the job leaves for its later attempts and for
the laptop (an environment's index, the outputs an attempt uploaded); the laptop signs
its record of the environments it vouched for with another (vouching.py). Made once,
kept in tpuctl's state dir readable by its user alone, or given as TPUCTL_SIGNING_KEY (a
CI machine that starts afresh each time, sharing the cache of the laptop's jobs). It
never leaves the laptop: not to a VM, not to the bucket; and it is scrubbed from the
`--debug` trace, as every job key is."""

from __future__ import annotations

import contextlib
import os
import secrets

from tpuctl import redact
from tpuctl.agent import signing
from tpuctl.config import state_dir
from tpuctl.errors import UsageError

FILE = "signing.key"
VARIABLE = "TPUCTL_SIGNING_KEY"
MIN_LENGTH = 32  # characters: a key shorter than this is refused


def key() -> str:
    """The key: TPUCTL_SIGNING_KEY's, else the state dir's, made on first use."""
    given = os.environ.get(VARIABLE, "").strip()
    if given:
        if len(given) < MIN_LENGTH:
            raise UsageError(
                f"{VARIABLE} must hold at least {MIN_LENGTH} characters (a random secret), "
                f"not {len(given)}"
            )
        redact.secret([given])
        return given
    path = state_dir() / FILE
    made = secrets.token_hex(32)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f"{FILE}.{os.getpid()}.tmp")
        fd = os.open(str(draft), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(made + "\n")
        with contextlib.suppress(FileExistsError):  # another run made it first: theirs
            os.link(draft, path)
        draft.unlink()
    value = path.read_text().strip()
    if len(value) < MIN_LENGTH:
        raise UsageError(
            f"{path} holds no signing key (at least {MIN_LENGTH} characters): delete it, "
            "and tpuctl makes a new one"
        )
    redact.secret([value])
    return value


def job_key(job_id: str, client_key: str | None = None) -> str:
    """The key of job `job_id`'s agents (signing.job_key), of this client's key."""
    derived = signing.job_key(key() if client_key is None else client_key, job_id)
    redact.secret([derived])
    return derived
