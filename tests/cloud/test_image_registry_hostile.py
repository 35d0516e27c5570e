"""A registry that lies is not believed (cloud/image_registry.py): a Docker-Content-Digest
that is not the bytes' sha256, a manifest over the bound, a token realm on another origin,
and a registry that is not there. The registry here is a local HTTP server that answers
as told; the adapter is made with its address as the factory would pass it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tpuctl.cloud.image_registry import MAX_MANIFEST, ImageRegistry
from tpuctl.cloud.images import parse_image
from tpuctl.errors import CloudError

IMAGE = parse_image("us-docker.pkg.dev/tpuctl-demo/images/trainer:v1")
MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "1" * 64}}).encode()


class _Lying(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        told = self.server.told
        if self.path == "/v2/":
            realm = told.get("realm", f"http://{self.headers['Host']}/v2/token")
            self._answer(401, b"{}", {"Www-Authenticate": f'Bearer realm="{realm}"'})
        elif self.path.startswith("/v2/token"):
            self.server.token_asked = True
            self._answer(200, json.dumps({"token": "t"}).encode())
        else:
            body = told.get("manifest", MANIFEST)
            headers = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}
            headers["Docker-Content-Digest"] = told.get("digest", "sha256:" + "f" * 64)
            self._answer(200, body, headers)

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # the client stops reading an answer over its bound, as it should
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)


@pytest.fixture
def lying() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Lying)
    server.told, server.token_asked = {}, False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _registry(address: str) -> ImageRegistry:
    return ImageRegistry(
        lambda host: (f"http://{address}", f"{host}/"), lambda: "token", lambda: "you@x.com"
    )


def _address(server: Any) -> str:
    return f"127.0.0.1:{server.server_address[1]}"


def test_a_digest_header_that_is_not_the_bytes_is_refused(lying) -> None:
    with pytest.raises(CloudError, match="whose digest is sha256:.*not sha256:f+: refused"):
        _registry(_address(lying)).resolve(IMAGE)


def test_a_manifest_over_the_bound_is_refused(lying) -> None:
    lying.told["manifest"] = b" " * (MAX_MANIFEST + 1)
    with pytest.raises(CloudError, match="over 4 MiB: refused"):
        _registry(_address(lying)).resolve(IMAGE)


def test_a_token_realm_on_another_origin_gets_no_token(lying) -> None:
    lying.told["realm"] = "http://127.0.0.2:9/v2/token"
    with pytest.raises(CloudError, match=r"token request to 'http://127.0.0.2:9/v2/token'"):
        _registry(_address(lying)).resolve(IMAGE)
    assert lying.token_asked is False


def test_a_registry_that_is_not_there_is_one_line() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{free.getsockname()[1]}"
    with pytest.raises(CloudError) as unreachable:
        _registry(address).resolve(IMAGE)
    assert str(unreachable.value) == (
        f"cannot reach Artifact Registry for {IMAGE}: ConnectionError"
    )
