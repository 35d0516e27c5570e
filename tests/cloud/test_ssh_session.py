"""A command's SSH channel is left in bounded time, whatever the server does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tpuctl.cloud import ssh


class Silent:
    """A stream, a process and a connection of a server that never answers again: no
    output, no exit status, and no reply to the channel's close."""

    def __init__(self) -> None:
        self.closed = False
        self.never = asyncio.Event()

    async def read(self, _n: int) -> bytes:
        await self.never.wait()
        return b""

    @property
    def stdout(self) -> Silent:
        return self

    @property
    def stderr(self) -> Silent:
        return self

    async def wait(self) -> None:
        await self.never.wait()

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        await self.never.wait()

    async def create_process(self, *_: Any, **__: Any) -> Silent:
        return self


def test_a_cancelled_command_leaves_a_server_that_never_closes_its_channel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run's log stream is cancelled once its job is over; a worker that never answers
    # the channel's close held that run for good (asyncssh waits for the close unbounded).
    monkeypatch.setattr(ssh, "CLOSE_WAIT", 0.01)

    async def scenario() -> Silent:
        server = Silent()
        session = ssh.Session(server, "worker 0")  # type: ignore[arg-type]
        task = asyncio.ensure_future(session.run("follow", lambda *_: None))
        await asyncio.sleep(0)  # the command is under way
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=60)  # a hang guard, not a speed check
        assert done, "the cancelled command is still waiting for the server's close"
        assert task.cancelled()
        return server

    assert asyncio.run(scenario()).closed
