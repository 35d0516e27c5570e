"""No web page drives the emulator (core/browsers.py): what a browser can send cross-origin,
or from a name rebound to 127.0.0.1, is refused before anything is done, on the API's port
and on Cloud Storage's. Requests go over raw HTTP, so the headers are exactly a browser's."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

NODES = "/v2/projects/tpuctl-demo/locations/us-central1-a/nodes?nodeId=evil"
BODY = json.dumps(
    {
        "acceleratorType": "v3-8",
        "runtimeVersion": "tpu-ubuntu2204-base",
        "metadata": {"startup-script": "touch /tmp/owned"},
    }
).encode()


def send(address: str, method: str, path: str, body: bytes, headers: dict[str, str]):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        conn.close()


# What a page can send without a preflight: a POST of text/plain, with the page's Origin.
SIMPLE = {"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://evil.example"}


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        (SIMPLE, 403, "a request from a web page (Origin: https://evil.example) is refused"),
        # the same JSON from a page whose own origin it is (a form can send this type)
        (
            {"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"},
            403,
            "from a web page",
        ),
        # DNS rebinding: the page's name now points at 127.0.0.1; no Origin on this one
        (
            {"Content-Type": "application/json", "Host": "evil.example:8470"},
            403,
            "Host 'evil.example:8470' is not this emulator's address",
        ),
        # a body that is not JSON, even with no Origin: no simple request reaches the API
        ({"Content-Type": "text/plain"}, 415, "a request body of type 'text/plain' is refused"),
        ({}, 415, "of type 'none' is refused"),
    ],
)
def test_a_request_a_web_page_could_send_creates_nothing(emulator, headers, status, said) -> None:
    code, answer = send(emulator.address, "POST", NODES, BODY, headers)
    assert code == status, answer
    assert said in answer["error"]["message"]
    assert emulator.nodes() == []


def test_the_control_plane_refuses_a_page_too(emulator) -> None:
    before = emulator.config()["durations"]["create"]
    body = json.dumps({"durations": {"create": 99}}).encode()
    code, _ = send(emulator.address, "POST", "/_emulator/v1/config", body, SIMPLE)
    assert code == 403
    assert emulator.config()["durations"]["create"] == before


def test_local_names_and_json_still_work(emulator) -> None:
    port = emulator.address.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        code, answer = send(
            emulator.address,
            "GET",
            "/v2/projects/tpuctl-demo/locations/us-central1-a/nodes",
            b"",
            {"Host": host},
        )
        assert code == 200, (host, answer)


def test_cloud_storage_refuses_a_page_upload(emulator) -> None:
    storage = urlsplit(emulator.status()["storage_endpoint"]).netloc
    client = emulator.storage_client()
    client.create_bucket("browsers-demo")
    path = "/upload/storage/v1/b/browsers-demo/o?uploadType=media&name=planted.py"
    code, answer = send(storage, "POST", path, b"print('owned')", SIMPLE)
    assert code == 403, answer
    assert "from a web page" in answer["error"]["message"]
    assert [b.name for b in client.list_blobs("browsers-demo")] == []
    # the same upload from a local client lands
    code, answer = send(storage, "POST", path, b"print('mine')", {"Content-Type": "text/plain"})
    assert code == 200, answer
    assert [b.name for b in client.list_blobs("browsers-demo")] == ["planted.py"]
