"""No port the emulator opens serves a web page, and nothing reaches Cloud Storage's server
past the proxy (core/browsers.py, storage/proxy.py, storage/private_net.py).

The emulator runs as its own process, as `tpuctl emulator start` runs it, with a bucket, an
object and a node (so its worker's SSH port is open too). Its ports are found in /proc
(listening.py), not listed here: whatever port it opens, now or later, is probed. Each
port speaks HTTP/1 (what a page's fetch, form or image sends), SSH, or HTTP/2 alone (gRPC
in clear text, which no browser speaks); each HTTP/1 port must answer 403 to every
request carrying a page's Origin or a rebound Host, grant no CORS, and leak no object.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.emulator import listening
from tpuctl.emulator.control.client import EmulatorControl

BUCKET = "every-port"
NODES = "/v2/projects/tpuctl-demo/locations/us-central1-a/nodes"
JSON = {"Content-Type": "application/json"}


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


@pytest.fixture
def emulator_process(isolated_env: Path, tmp_path: Path) -> Iterator[tuple[int, str]]:
    """(pid, address) of an emulator of its own, serving until the test ends."""
    argv = [sys.executable, "-m", "tpuctl.emulator", "--port", "0"]
    argv += ["--state-dir", str(tmp_path / "emu")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("export TPUCTL_EMULATOR_HOST="), line
        yield proc.pid, line.split("=", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(pid: int, control: EmulatorControl) -> list[listening.Listener]:
    """The emulator's listeners once its node's worker serves SSH."""
    ssh_port = control.status()["ssh_port"]
    deadline = time.monotonic() + 60  # a bound on a hang, not a measurement
    while time.monotonic() < deadline:
        found = listening.listeners(pid)
        if any(item.port == ssh_port for item in found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"no worker serves SSH on port {ssh_port}: {found}")


def test_every_port_the_emulator_opens_refuses_a_web_page(emulator_process) -> None:
    pid, address = emulator_process
    control = EmulatorControl(address)
    control.durations(create=0, hostkeys=0)
    status = control.status()
    api, proxy = _host_port(address), _host_port(urlsplit(status["storage_endpoint"]).netloc)
    # a local client's bucket, object and node, through the checked ports
    made = listening.send(
        *proxy, "POST", "/storage/v1/b?project=tpuctl-demo", JSON, b'{"name": "every-port"}'
    )
    assert made[0] == 200, made
    upload = f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={listening.SECRET_NAME}"
    made = listening.send(*proxy, "POST", upload, {}, listening.SECRET_BYTES)
    assert made[0] == 200, made
    made = listening.send(*api, "POST", f"{NODES}?nodeId=mine", JSON, listening.NODE)
    assert made[0] == 200, made

    found = _ready(pid, control)
    reachable = [item for item in found if item.ours]
    kinds = {(item.host, item.port): listening.protocol(item.host, item.port) for item in reachable}
    assert set(kinds.values()) <= {"http", "ssh", "http2"}, kinds
    # the enumeration sees what the status names (a check of the finding, not a list)
    assert kinds[api] == kinds[proxy] == "http"
    assert kinds[_host_port(status["tpu_grpc_endpoint"])] == "http2"
    assert kinds[_host_port(status["monitoring_endpoint"])] == "http2"
    assert "ssh" in kinds.values()

    problems = []
    for (host, port), kind in sorted(kinds.items()):
        if kind == "http":
            problems += listening.unchecked(host, port, BUCKET, NODES)
    assert problems == []

    # Cloud Storage's server listens, in a network namespace nothing here is in
    backend = [item for item in found if "fake-gcs-server" in item.command]
    assert backend and not any(item.ours for item in backend), backend
    assert not any(item.ours for item in found if item not in reachable)
    assert all(item.ours or item in backend for item in found)

    # nothing was made or planted, and the local client's calls still work
    status_code, _, body = listening.send(*proxy, "GET", f"/storage/v1/b/{BUCKET}/o", {})
    assert status_code == 200
    assert listening.SECRET_NAME.encode() in body and b"planted" not in body
    assert [n["name"].rsplit("/", 1)[1] for n in control.nodes()] == ["mine"]


class _Unchecked(BaseHTTPRequestHandler):
    """An HTTP server as fake-gcs-server answers a page: anything, to anyone."""

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = f"{listening.SECRET_NAME}".encode()
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_OPTIONS = _any

    def log_message(self, *args: object) -> None:
        pass


def test_an_unchecked_port_is_found_and_reported() -> None:
    """The probe above fails on a port that answers a page (the test can fail)."""
    import os

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unchecked)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        mine = [item for item in listening.listeners(os.getpid()) if item.port == port]
        assert [(item.host, item.ours) for item in mine] == [("127.0.0.1", True)]
        assert listening.protocol("127.0.0.1", port) == "http"
        problems = listening.unchecked("127.0.0.1", port, BUCKET, NODES)
        requests = listening.web_page_requests(BUCKET, NODES)
        assert sum("200, not 403" in p for p in problems) == len(requests)
        assert sum("Access-Control-Allow-Origin: *" in p for p in problems) == len(requests)
        assert sum("the bucket's object in the answer" in p for p in problems) == len(requests)
        assert any("OPTIONS (a preflight): 200" in p for p in problems)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
