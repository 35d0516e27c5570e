"""The build of a job's environment (`Builder`, which `envs.Environments` is): by the one
worker holding the entry's lock, `pip wheel` for this VM's Python from the user's indexes,
the wheels uploaded content-addressed, the index written LAST, the lock kept fresh while
it goes on and let go after (envs.py: the whole protocol).

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple
from urllib.parse import urlsplit

from . import envkeys, signing
from .downloads import md5_base64
from .net import HttpError, Json
from .storage import Storage
from .streams import Transfers

LOCK_REFRESH = 15.0  # seconds between the builder's rewrites of its lock
PYPI = "https://pypi.org/simple"


class EnvFailed(Exception):
    """The environment could not be made: one line saying why (the job's message, from
    the worker that met it: `here`; the others only log it)."""

    def __init__(self, message: str, here: bool = True) -> None:
        super().__init__(message)
        self.here = here


class Wanted(NamedTuple):
    """An environment to obtain: its key, requirement set, VM facts, local wheel folder
    and the job's environment (for pip)."""

    key: str
    lines: list[str]
    facts: Json
    wheels: Path
    env: dict[str, str]


class Builder:
    """The build of an environment's wheels and index (an `Environments` is one: these
    are its attributes)."""

    storage: Storage
    job: str
    attempt: int
    worker: int
    say: Callable[[str], None]
    log: Path
    python: str
    phases: dict[str, float]
    outcome: Json
    signing_key: str  # the job's key (signing.py): the index is signed with it
    hidden: list[str]  # the job's --env values: never in the log, the lock or a status

    def lock_value(self, **more: Any) -> Json:
        return dict(
            job=self.job, attempt=self.attempt, worker=self.worker, at=round(time.time(), 3), **more
        )

    def build(self, want: Wanted) -> Json:
        """Resolve and build the wheels here (the lock held, and kept fresh), upload them,
        write the index last, let the lock go; on a failure the lock says it."""
        lock = envkeys.lock_path(want.key)
        stop = threading.Event()
        keeper = threading.Thread(target=self.keep_lock, args=(lock, stop), daemon=True)
        keeper.start()
        try:
            index = signing.sign(self._build(want), self.signing_key)
        except EnvFailed as e:
            stop.set()
            keeper.join()
            self.storage.write_json(lock, self.lock_value(error=str(e)))
            raise
        finally:
            stop.set()
            keeper.join()
        # this job's own build first (its later attempts and the client read it there)
        self.storage.write_json(envkeys.built_path(want.key, self.job), index)
        self.storage.write_json(envkeys.index_path(want.key), index)  # LAST: the entry is whole
        self.storage.delete(lock)
        return index

    def keep_lock(self, lock: str, stop: threading.Event) -> None:
        """A thread: the lock rewritten while the build goes on (others see it live)."""
        while not stop.wait(LOCK_REFRESH):
            try:
                self.storage.write_json(lock, self.lock_value())
            except HttpError:
                continue

    def _build(self, want: Wanted) -> Json:
        key, wheels, env, t = want.key, want.wheels, want.env, time.monotonic()
        if wheels.exists():
            shutil.rmtree(str(wheels))
        wheels.mkdir(parents=True)
        requirements = wheels.parent / "requirements.txt"
        requirements.write_text("".join(line + "\n" for line in want.lines))
        command = [
            self.python,
            "-m",
            "pip",
            "wheel",
            "--no-cache-dir",
            "--no-input",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            "-r",
            str(requirements),
        ]
        self.say(
            f"environment {key[:12]}: resolving and building {len(want.lines)} "
            f"requirement(s) from {index_named(env)}"
        )
        out = subprocess.run(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(wheels.parent),
        )
        said = scrub(out.stdout.decode(errors="replace"), self.hidden)
        with open(str(self.log), "ab") as log:
            log.write(said.encode())
        if out.returncode:
            raise EnvFailed(resolution_error(said, env))
        self.phases["resolve"] = time.monotonic() - t
        t = time.monotonic()
        prefix = envkeys.env_prefix(key) + "wheels/"
        listed = {item["name"]: item.get("md5Hash") for item in self.storage.objects(prefix)}
        entries, sent = [], 0
        with Transfers(self.storage) as transfers:
            for path in sorted(wheels.glob("*.whl")):
                sha, size = sha256_of(path), path.stat().st_size
                entries.append({"file": path.name, "sha256": sha, "size": size})
                name = envkeys.wheel_path(key, sha, path.name)
                if listed.get(name) != md5_of(path):  # there already, whole: not sent again
                    sent += size
                    transfers.upload(name, path)
        self.phases["upload"] = time.monotonic() - t
        self.outcome.update(how="built", bytes=sent, wheels=len(entries))
        return {
            "version": envkeys.INDEX_VERSION,
            "key": key,
            "recipe": envkeys.RECIPE,
            "requirements": want.lines,
            "facts": want.facts,
            "wheels": entries,
            "packages": [package_of(str(e["file"])) for e in entries],
            "job": self.job,
            "attempt": self.attempt,
            "worker": self.worker,
            "built": round(time.time(), 3),
        }


def sha256_of(path: Path) -> str:
    return _hashed(path, hashlib.sha256()).hexdigest()


def md5_of(path: Path) -> str:
    """As Cloud Storage lists it (`md5Hash`)."""
    return md5_base64(_hashed(path, hashlib.md5()))


def _hashed(path: Path, digest: Any) -> Any:
    with open(str(path), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest


def package_of(wheel: str) -> str:
    """`name==version` of a wheel's file name (PEP 427)."""
    parts = wheel.split("-")
    return f"{parts[0]}=={parts[1]}" if len(parts) >= 2 else wheel


def index_named(env: dict[str, str]) -> str:
    """The indexes pip asks, each reduced to its host (`https://host/…`): a token may be
    in the credentials or the path."""
    names = [env.get("PIP_INDEX_URL") or PYPI, *(env.get("PIP_EXTRA_INDEX_URL") or "").split()]
    return " + ".join(host_only(n) for n in names if n)


# scheme://[credentials@]host[:port] and the rest of the URL
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^\s/@]*@)?([^\s/:@?#'\"]+(?::\d+)?)[^\s'\"]*")
# pip's own lines naming the indexes it asks, whole
_INDEX_LINE = re.compile(r"(?im)^\s*Looking in (?:indexes|links):.*(?:\n|$)")


def host_only(text: str) -> str:
    """Every URL in `text` reduced to its scheme and host (`https://host/…`)."""
    return _URL.sub(lambda m: f"{m.group(1)}{m.group(2)}/…", text)


# The shortest value or URL piece `scrub` takes out: a 1- or 2-character one is left in
# the log (taking out every `1` or `a` would leave nothing of it readable, and a secret
# that short protects nothing).
SHORTEST = 3


def scrub(text: str, hidden: list[str]) -> str:
    """pip's output as tpuctl writes it to the job's log: no line naming the indexes,
    every URL reduced to its host, and nothing of an `--env` value (`hidden`) left in it:
    each value whole; in a value that holds URLs, each piece of every URL but its host
    and port (the user, the password, every path segment, query name and value, the
    fragment); in other values, each piece of 8 or more characters between separators.
    A value or piece shorter than SHORTEST characters, or one that is part of a URL's
    host (shown anyway), stays."""
    text = host_only(_INDEX_LINE.sub("", text))
    for part in sorted(secret_parts(hidden), key=len, reverse=True):
        text = text.replace(part, "[redacted]")
    return text


def secret_parts(hidden: list[str]) -> set[str]:
    """What `scrub` takes out of a text for the values `hidden`."""
    parts, hosts = set(), set()
    for value in hidden:
        parts.add(value)
        for m in _URL.finditer(value):
            url = urlsplit(m.group(0))
            hosts.add(url.hostname or "")
            who = f"{url.username or ''}:{url.password or ''}"
            pieces = f"{who}/{url.path}?{url.query}#{url.fragment}"
            parts.update(re.split(r"[:/?&=#;]+", pieces))
        others = _URL.sub(" ", value)
        parts.update(p for p in re.split(r"[/:@?&=#\s]+", others) if len(p) >= 8)
    return {p for p in parts if len(p) >= SHORTEST and not any(p in h for h in hosts)}


def resolution_error(output: str, env: dict[str, str]) -> str:
    """pip's failure as one line naming the requirement and the index."""
    where = index_named(env)
    found = re.search(r"^(\S+): No module named pip\s*$", output, re.M)
    if found:  # the image's Python has no pip (apt's python3-pip): nothing can be built
        return (
            f"environment: {found.group(1)} has no pip to build the wheels with: install "
            "python3-pip in the image, or run with --no-requirements"
        )
    found = re.search(r"No matching distribution found for (\S+)", output)
    if found:
        return f"environment: no version of {found.group(1)} found on {where}"
    found = re.search(r"Could not find a version that satisfies the requirement (\S+)", output)
    if found:
        return f"environment: no version of {found.group(1)} found on {where}"
    unreached = unreachable_url(output)
    if unreached:  # a URL pip could not fetch (a requirement's own, or the index's)
        return f"environment: pip could not fetch {unreached}"
    errors = [ln.strip() for ln in output.splitlines() if ln.strip().startswith("ERROR:")]
    last = errors[-1] if errors else (output.strip().splitlines() or ["pip failed"])[-1]
    return f"environment: pip could not build the requirements from {where}: {last[:300]}"


# urllib3's words in pip's error for a host that does not answer: `HTTPConnectionPool(
# host='h', port=9): Max retries exceeded with url: /p/x.whl (Caused by
# NewConnectionError('<...>: Failed to establish a new connection: [Errno 111] ...'))`
_POOL = re.compile(
    r"(HTTPS?)ConnectionPool\(host='([^']+)', port=(\d+)\): Max retries exceeded with "
    r"url: (\S+) \(Caused by \w+\((.*)"
)


def unreachable_url(output: str) -> str | None:
    """`http://host:port/…/x.whl: why` for the URL pip could not reach (its path but the
    file's name left out: a token may be in it), or None."""
    found = _POOL.search(output)
    if not found:
        return None
    scheme, host, port, path, cause = found.groups()
    default = {"HTTP": "80", "HTTPS": "443"}[scheme]
    netloc = host if port == default else f"{host}:{port}"
    file = path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
    why = re.sub(r"['\")]+$", "", cause.rsplit(": ", 1)[-1]).strip()
    return f"{scheme.lower()}://{netloc}/…/{file}: {why[:200]}"
