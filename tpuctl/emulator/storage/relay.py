"""The storage proxy's relay to fake-gcs-server (proxy.py): a request passed on and its
answer passed back, hop-by-hop and CORS headers dropped, fake-gcs-server's own address
in links replaced by the proxy's; bodies stream both ways in blocks of BLOCK bytes (a
checkpoint of gigabytes is never held in memory), one kept-alive upstream connection per
thread."""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tpuctl.emulator.core.http_server import QuietServer

BLOCK = 1 << 20
_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "expect",
}


def passed(header: str) -> bool:
    """An answer's header passed on: not hop-by-hop, not CORS (fake-gcs-server allows `*`)."""
    return header.lower() not in _HOP and not header.lower().startswith("access-control-")


class Upstream(QuietServer):
    """A server whose handler is a `Relay`: what the relay asks of it."""

    target: str  # the server behind's host:port
    storage: Any  # server.StorageServer: its `connection(timeout)`
    local: threading.local  # each thread's kept-alive upstream connection (`conn`)

    @property
    def url(self) -> str:
        """Its own address, as clients reach it."""
        raise NotImplementedError


class Relay(BaseHTTPRequestHandler):
    """Passes a request on to the server behind (`server.target`, reached by
    `server.storage.connection`) and its answer back, bodies streamed in blocks of BLOCK
    bytes, over one kept-alive upstream connection per thread (`server.local`)."""

    protocol_version = "HTTP/1.1"
    server: Upstream

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _answer(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes
    ) -> None:
        """A whole answer, held in memory (small: an error, or bucket metadata)."""
        self.send_response(status, reason or None)
        kind = "application/json; charset=UTF-8"
        for name, value in headers:
            if name.lower() == "content-type":
                kind = value
            elif passed(name) and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drain(self) -> None:
        """Read the request body we will not pass on, so the connection stays usable."""
        for _ in self._body():
            pass

    def _body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return
                yield self.rfile.read(size)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            data = self.rfile.read(min(BLOCK, left))
            if not data:
                return
            left -= len(data)
            yield data

    def _upstream(self) -> http.client.HTTPConnection:
        local = self.server.local
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = self.server.storage.connection(300)
            local.conn = conn
        return conn

    def _open(self, length: int | None = None) -> http.client.HTTPConnection:
        """The upstream connection with this request's line and headers sent (`length`:
        the body's, replacing the request's own and its encoding)."""
        chunked = length is None and self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        drop = _HOP | ({"content-length", "accept-encoding"} if length is not None else set())
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", self.server.target)
                for name, value in self.headers.items():
                    if name.lower() not in drop:
                        conn.putheader(name, value)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                if length is not None:
                    conn.putheader("Content-Length", str(length))
                conn.endheaders()
                return conn
            except OSError:
                conn.close()
                self.server.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _response(self, conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
        try:
            return conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.server.local.conn = None
            raise

    def _exchange(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send this request with `body`; the whole answer (status, reason, headers, body)."""
        conn = self._open(len(body))
        if body:
            conn.send(body)
        resp = self._response(conn)
        data = resp.read()
        if resp.will_close:
            conn.close()
            self.server.local.conn = None
        return resp.status, resp.reason, resp.getheaders(), data

    def _forward(self) -> None:
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        conn = self._open()
        for data in self._body():
            conn.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if chunked:
            conn.send(b"0\r\n\r\n")
        resp = self._response(conn)
        self.send_response(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        upstream = f"http://{self.server.target}"
        # An object's metadata names its links (mediaLink, selfLink) at fake-gcs-server's
        # own address, which only this proxy reaches: they name the proxy instead, as
        # Cloud Storage's name storage.googleapis.com (a client downloads a listed blob
        # by its mediaLink).
        metadata = None
        media = "alt=media" in self.path or self.path.startswith("/download/")
        if (
            "json" in (resp.getheader("Content-Type") or "")
            and not media
            and self.command != "HEAD"
        ):
            metadata = resp.read().replace(upstream.encode(), self.server.url.encode())
        for name, value in resp.getheaders():
            if name.lower() == "location" and value.startswith(upstream):
                value = self.server.url + value[len(upstream) :]  # a resumable session's
            if metadata is not None and name.lower() in ("content-length", "transfer-encoding"):
                continue
            if passed(name):
                self.send_header(name, value)
        if metadata is not None:
            self.send_header("Content-Length", str(len(metadata)))
        elif length is None and self.command != "HEAD" and resp.status not in (204, 304):
            self.send_header("Connection", "close")  # the end of the body is the close
            self.close_connection = True
        self.end_headers()
        if metadata is not None:
            self.wfile.write(metadata)
        while data := resp.read(BLOCK):
            self.wfile.write(data)
        if resp.will_close:
            conn.close()
            self.server.local.conn = None
