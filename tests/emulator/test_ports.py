"""A restarted emulator asks for the ports it had; one taken meanwhile is not fatal."""

from __future__ import annotations

import socket

import grpc

from tpuctl.emulator.core.grpc_server import GrpcFront


class _Empty(GrpcFront):
    def handlers(self) -> list[object]:
        return []


def test_a_grpc_front_whose_port_is_taken_listens_on_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        front = _Empty("127.0.0.1", port).start()
        try:
            assert front.port not in (0, port)
            channel = grpc.insecure_channel(front.address)
            grpc.channel_ready_future(channel).result(timeout=10)
            channel.close()
        finally:
            front.stop()


def test_a_grpc_front_takes_the_port_it_asks_for_when_free() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    front = _Empty("127.0.0.1", port).start()
    try:
        assert front.port == port
    finally:
        front.stop()
