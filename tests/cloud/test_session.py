"""The session tpuctl's REST calls go through (cloud/session.py), against real local HTTP
servers: the credentials' headers on every call, a 401 refreshed as google-auth's session
refreshes it, no redirect followed (the token never leaves for another host), answers
read in bounded memory, transport faults retried and certificate faults not, and the
environment's proxy and CA bundle honoured."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gx
from google.auth import exceptions as auth_x
from google.oauth2.credentials import Credentials

import tpuctl
from tpuctl.cloud import rest, session
from tpuctl.cloud.errors import translate
from tpuctl.cloud.retry import is_transient
from tpuctl.errors import CloudError, ConfigError

Answer = tuple[int, dict[str, str], bytes]


class Server:
    """A local HTTP server answering each request with `answer(handler)`; what it got is
    kept in `got` (method, path, headers, body)."""

    def __init__(self, answer: Callable[[Any], Answer], tls: ssl.SSLContext | None = None):
        self.got: list[tuple[str, str, dict[str, str], bytes]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.got.append((self.command, self.path, headers, body))
                status, headers, data = answer(self)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        class Quiet(http.server.ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that stopped reading (the bounded read) is not news

        self.http = Quiet(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.http.socket = tls.wrap_socket(self.http.socket, server_side=True)
        self.port = self.http.server_address[1]
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def make(answer: Callable[[Any], Answer], tls: ssl.SSLContext | None = None) -> Server:
        made.append(Server(answer, tls))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _json(status: int, body: Any) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def test_a_call_carries_the_credentials_headers_its_params_and_its_json(serve: Any) -> None:
    api = serve(lambda h: _json(200, {"nodes": [{"name": "a"}]}))
    credentials = Credentials(token="ya29.token", quota_project_id="billed-here")
    answer = session.AuthorizedSession(credentials).request(
        "POST",
        api.url("/v2/projects/p/nodes"),
        params={"pageToken": "t 1", "skip": None},
        json={"labels": {"a": "b"}},
    )
    assert answer.status_code == 200 and answer.json() == {"nodes": [{"name": "a"}]}
    method, path, headers, body = api.got[0]
    assert (method, path) == ("POST", "/v2/projects/p/nodes?pageToken=t+1")
    assert headers["authorization"] == "Bearer ya29.token"
    assert headers["x-goog-user-project"] == "billed-here"  # the quota project, as gcloud's
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == f"tpuctl/{tpuctl.__version__}"
    assert json.loads(body) == {"labels": {"a": "b"}}


def test_a_401_refreshes_the_credentials_and_sends_again_at_most_twice(serve: Any) -> None:
    tokens = iter(["first", "second", "third", "fourth"])
    accepted: set[str] = set()

    def answer(h: Any) -> Answer:
        if h.path == "/token":
            return _json(200, {"access_token": next(tokens), "expires_in": 3600})
        seen = h.headers["Authorization"].removeprefix("Bearer ")
        return _json(200, {"ok": seen}) if seen in accepted else _json(401, {"error": {}})

    server = serve(answer)
    credentials = Credentials(
        token="stale",
        refresh_token="1//refresh",
        client_id="id",
        client_secret="secret",
        token_uri=server.url("/token"),
    )
    calls = session.AuthorizedSession(credentials)
    accepted.add("second")
    ok = calls.get(server.url("/v2/x"))  # stale -> 401, refresh: first -> 401, second -> 200
    assert ok.status_code == 200 and ok.json() == {"ok": "second"}
    accepted.clear()
    refused = calls.get(server.url("/v2/x"))  # second, third, fourth: 401 each, given up
    assert refused.status_code == 401
    asked = [h["authorization"] for m, p, h, _ in server.got if p == "/v2/x"]
    assert asked == [f"Bearer {t}" for t in ("stale", "first", "second")] + [
        f"Bearer {t}" for t in ("second", "third", "fourth")
    ]  # two refreshes a call, as google-auth's session makes them, and no more
    assert [p for _, p, _, _ in server.got].count("/token") == 4


def test_a_redirect_is_not_followed_and_is_an_error(serve: Any) -> None:
    elsewhere = serve(lambda h: _json(200, {"stolen": True}))
    api = serve(lambda h: (302, {"Location": elsewhere.url("/catch")}, b""))
    credentials = Credentials(token="ya29.secret")
    answer = session.AuthorizedSession(credentials).get(api.url("/v2/nodes"))
    assert answer.status_code == 302
    assert elsewhere.got == []  # the token went nowhere else
    with pytest.raises(gx.GoogleAPICallError) as raised:
        rest.send(lambda: session.AuthorizedSession(credentials), "GET", api.url("/v2/nodes"))
    assert raised.value.code == 302


def test_an_error_answer_becomes_google_api_cores_exception_with_the_servers_words(
    serve: Any,
) -> None:
    body = {
        "error": {
            "code": 403,
            "message": "Permission 'tpu.nodes.list' denied on 'projects/p'",
            "status": "PERMISSION_DENIED",
        }
    }
    api = serve(lambda h: _json(403, body))
    with pytest.raises(gx.Forbidden) as raised:
        rest.send(
            lambda: session.AuthorizedSession(Credentials(token="t")), "GET", api.url("/v2/n")
        )
    assert "Permission 'tpu.nodes.list' denied" in str(raised.value)
    assert "GET http://127.0.0.1" in str(raised.value)  # api-core's prefix, as before


def test_an_answer_over_the_bound_is_refused_naming_the_url(serve: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(session, "MAX_ANSWER", 4096)
    api = serve(lambda h: _json(200, {"items": ["x" * 100] * 100}))  # about 10 KB
    with pytest.raises(CloudError) as raised:
        session.AuthorizedSession(Credentials(token="t")).get(api.url("/v2/big?pageToken=a"))
    assert raised.value.message == (
        f"the answer from {api.url('/v2/big')} is over 0 MiB; tpuctl reads no more of it"
    )
    small = serve(lambda h: _json(200, {"items": ["x"] * 10}))
    monkeypatch.setattr(session, "MAX_ANSWER", len(_json(200, {"items": ["x"] * 10})[2]))
    answer = session.AuthorizedSession(Credentials(token="t")).get(small.url("/"))
    assert answer.json() == {"items": ["x"] * 10}  # an answer of exactly the bound is whole


def test_no_answer_is_a_transport_fault_retried_and_then_said_in_one_line(serve: Any) -> None:
    closed = serve(lambda h: _json(200, {}))
    url = closed.url("/v2/nodes")
    closed.close()
    with pytest.raises(auth_x.TransportError) as raised:
        session.AuthorizedSession(Credentials(token="t")).get(url)
    assert is_transient(raised.value)
    said = translate(raised.value, "the nodes", "the TPU API", "is it up?")
    assert said.message == "cannot reach the TPU API for the nodes: Connection refused"


def test_the_environments_proxy_carries_the_call(serve: Any, monkeypatch: Any) -> None:
    proxy = serve(lambda h: _json(200, {"via": "proxy"}))
    monkeypatch.setenv("http_proxy", proxy.url(""))
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    answer = session.AuthorizedSession(Credentials(token="t")).get(
        "http://tpu.example.invalid/v2/nodes"
    )
    assert answer.json() == {"via": "proxy"}
    assert proxy.got[0][1] == "http://tpu.example.invalid/v2/nodes"  # asked of the proxy
    monkeypatch.setenv("no_proxy", "127.0.0.1")  # and no_proxy is honoured
    direct = serve(lambda h: _json(200, {"via": "direct"}))
    assert session.send("GET", direct.url("/x")).json() == {"via": "direct"}


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no public bundle trusts (cryptography comes with
    google-auth)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_tls_is_verified_against_the_environments_bundle_and_never_retried_when_it_fails(
    serve: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    api = serve(lambda h: _json(200, {"secure": True}), tls)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(session, "_context", None)
    with pytest.raises(CloudError) as raised:  # certifi's bundle: refused, at once
        session.send("GET", api.url("/v2/nodes", "https"))
    assert raised.value.message == (
        f"the TLS certificate of 127.0.0.1:{api.port} did not verify: self-signed certificate"
    )
    assert "REQUESTS_CA_BUNDLE" in (raised.value.hint or "")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    monkeypatch.setattr(session, "_context", None)
    assert session.send("GET", api.url("/v2/nodes", "https")).json() == {"secure": True}
    for bad, why in ((tmp_path / "none.pem", "No such file or directory"), (key, "")):
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bad))  # missing, or not certificates
        monkeypatch.setattr(session, "_context", None)
        with pytest.raises(ConfigError) as refused:  # one line at once, never retried
            session.send("GET", api.url("/v2/nodes", "https"))
        assert refused.value.message.startswith(
            f"cannot load the CA certificates of REQUESTS_CA_BUNDLE={bad}: {why}"
        )
