"""The metadata server: its values, the service account's token, and who this worker is.
Reached at TPUCTL_METADATA_URL (read once, at import), Google's by default
(contributing/runner-internals.md, "Endpoints").

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
import os
import threading
import time

from .net import HttpError, Json, http

_GOOGLE_METADATA = "http://metadata.google.internal/computeMetadata/v1"
METADATA_URL = os.environ.get("TPUCTL_METADATA_URL", _GOOGLE_METADATA).rstrip("/")


def metadata(path: str) -> str:
    return http("GET", f"{METADATA_URL}/{path}", headers={"Metadata-Flavor": "Google"})[2].decode()


class Token:
    """The service account's access token, cached until a minute before it expires."""

    def __init__(self) -> None:
        self._value, self._expires, self._lock = "", 0.0, threading.Lock()

    def headers(self, **extra: str) -> dict[str, str]:
        with self._lock:
            if time.time() >= self._expires:
                data = json.loads(metadata("instance/service-accounts/default/token"))
                self._value = data["access_token"]
                self._expires = time.time() + float(data.get("expires_in", 300)) - 60
            return dict(extra, Authorization="Bearer " + self._value)


def identity() -> Json:
    """Who this VM is: project, zone, node id, worker number and count, runtime version."""
    env = {}
    for line in attribute("tpu-env").splitlines():
        key, _, value = line.partition(":")
        env[key.strip()] = value.strip().strip("'\"")
    endpoints = attribute("worker-network-endpoints").split(",")
    return {
        "project": metadata("project/project-id"),
        "zone": metadata("instance/zone").rsplit("/", 1)[-1],
        "node": env.get("NODE_ID", ""),  # the TPU API's; on Compute Engine, the client's
        "worker": int(worker_number()),
        "workers": len([e for e in endpoints if e]) or 1,
        "endpoints": [e for e in endpoints if e],
        "runtime": env.get("RUNTIME_VERSION", ""),  # an environment's key has it (envkeys.py)
    }


def worker_number() -> str:
    """This VM's worker number: the TPU API's `agent-worker-number`, or on a Compute
    Engine slice `worker-id` (docs/compute-engine.md, "Multi-host slices"); a VM with neither
    is a single host, worker 0."""
    return attribute("agent-worker-number") or attribute("worker-id") or "0"


def attribute(name: str) -> str:
    """An instance attribute, "" when the VM has none of that name."""
    try:
        return metadata(f"instance/attributes/{name}")
    except HttpError as e:
        if e.status != 404:
            raise
    return ""
