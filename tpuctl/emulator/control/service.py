"""The emulator's own control plane: the paths under `client.CONTROL_PREFIX` of its REST
port (`urls.py` routes them to the backend's calls, `calls.py`), answered whole
(`core.service.Prefix`)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from tpuctl.emulator.control import urls
from tpuctl.emulator.control.client import CONTROL_PREFIX
from tpuctl.emulator.core.service import Answer, Prefix, Request, json_answer


def _respond(backend: Any, request: Request) -> Answer:
    body = request.body()
    name, spec, render = urls.control_route(request.method, request.path)
    args = urls.control_arguments(spec, {**request.query, **body})
    method = attrgetter(name)(backend)
    if render is None:
        return json_answer(200, method(*args), b"\n")  # a shell's prompt on its own line
    with backend.lock:  # rendered as the call left the state
        answer = render(method(*args))
    return json_answer(200, answer, b"\n")


CONTROL = Prefix(CONTROL_PREFIX, _respond)
