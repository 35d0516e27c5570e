"""The workers' metadata server: the paths under `server.PREFIX` of the emulator's own
port, answered whole with the metadata server's own headers (`core.service.Prefix`)."""

from __future__ import annotations

import traceback
from typing import Any

from tpuctl.emulator.core.service import Answer, Prefix, Request
from tpuctl.emulator.metadata import server


def _respond(backend: Any, request: Request) -> Answer:
    try:
        status, content_type, data, extra = server.respond(
            backend, request.path, request.query, request.headers
        )
    except Exception as exc:  # a bug here must still answer
        traceback.print_exc()
        status, content_type, data = 500, "text/plain", f"emulator bug: {exc!r}".encode()
        extra = {}
    headers = [("Metadata-Flavor", "Google"), *extra.items(), ("Content-Type", content_type)]
    return status, headers, data


METADATA = Prefix(server.PREFIX, _respond)
