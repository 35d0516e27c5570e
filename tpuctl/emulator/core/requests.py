"""What the front end keeps of the API calls it serves, for the control plane: a count
per verb (`GET /_emulator/v1/requests`) and the last request bodies (`requests/bodies`,
for comparing what clients send, docs/compatibility.md).

Not part of the state: never saved, cleared by a reset. Its own lock, a leaf one (it
calls nothing while holding it), so counting never waits for the backend's.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from typing import Any

BODY_LOG_SIZE = 200  # request bodies kept for GET /_emulator/v1/requests/bodies


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        # bounded, so a long run cannot grow it
        self._bodies: deque[dict[str, Any]] = deque(maxlen=BODY_LOG_SIZE)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._bodies.clear()

    def count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def record(
        self, verb: str, method: str, path: str, query: dict[str, str], body: dict[str, Any]
    ) -> None:
        """Keep an API request's body (the last BODY_LOG_SIZE); reads without a body are
        left out."""
        if not body and method in ("GET", "DELETE"):
            return
        entry = {"verb": verb, "method": method, "path": path, "query": dict(query), "body": body}
        with self._lock:
            self._bodies.append(entry)

    def bodies(self, method: str | None = None) -> list[dict[str, Any]]:
        """The request bodies kept, oldest first; `method` (e.g. `create`,
        `queuedResources.create`, `patch`) keeps those of one API method."""
        with self._lock:
            return [dict(e) for e in self._bodies if method in (None, e["verb"])]
