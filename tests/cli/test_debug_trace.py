"""`--debug` traces every call (method, URL, status) and never shows a credential."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tpuctl import redact

# What a real trace would carry, shaped as Google's are.
REFRESH = "1//0gLq3Rr5Zf8xCgYIARAAGBASNwF-L9IrSECRETREFRESH"
CLIENT_SECRET = "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1"
ACCESS = "ya29.a0AfB_byCSECRETACCESSTOKEN0123456789"
SIGNATURE = "4f2a9c0e1b7d3a5c9e8f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2"
ENV_SECRET = "hf_SeCrEtHuggingFaceTokenValue42"

PROGRAM = textwrap.dedent(
    f"""
    import http.server, json, sys, threading, logging
    if sys.argv[1] == "tpuctl":  # the session tpuctl's REST calls go through
        from tpuctl.cloud.session import AuthorizedSession
    else:  # google-auth's, which the Cloud Storage client's calls go through
        from google.auth.transport.requests import AuthorizedSession
    from google.oauth2.credentials import Credentials
    from tpuctl import redact
    from tpuctl.cli import _set_debug

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass
        def _answer(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer({{"access_token": {ACCESS!r}, "expires_in": 3600,
                           "refresh_token": {REFRESH!r}}})
        def do_GET(self):
            self._answer({{"ok": True}})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{{server.server_address[1]}}"
    _set_debug(True)
    redact.secret([{ENV_SECRET!r}])
    creds = Credentials(None, refresh_token={REFRESH!r}, client_id="id.apps.googleusercontent.com",
                        client_secret={CLIENT_SECRET!r}, token_uri=base + "/token")
    session = AuthorizedSession(creds)  # refreshes (POST with the secrets), then GETs
    reply = session.get(base + "/storage/v1/b/bkt/o/x?X-Goog-Signature={SIGNATURE}&alt=media")
    assert reply.status_code == 200
    logging.getLogger("tpuctl").debug("env for the script: HF_TOKEN=%s", {ENV_SECRET!r})
    logging.getLogger("tpuctl").debug("header %s", {{"Authorization": "Bearer {ACCESS}"}})
    """
)


@pytest.mark.parametrize("session", ["tpuctl", "google-auth"])
def test_a_debug_trace_names_each_call_and_no_credential(session: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, session], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    trace = done.stderr
    assert '"POST /token HTTP/1.1" 200' in trace  # the call is shown ...
    assert "GET /storage/v1/b/bkt/o/x?X-Goog-Signature=[redacted]&alt=media" in trace
    assert "HF_TOKEN=[redacted]" in trace
    for credential in (REFRESH, CLIENT_SECRET, ACCESS, SIGNATURE, ENV_SECRET, "GOCSPX"):
        assert credential not in trace  # ... and nothing that lets anyone in
    assert done.stdout == ""  # stdout stays clean


def test_scrub_takes_out_every_form_of_credential() -> None:
    cases = {
        "Authorization: Bearer ya29.abc.def-ghi": "Authorization: [redacted]",
        "{'authorization': 'Basic dXNlcjpwYXNzd29yZA=='}": "{'authorization': '[redacted]'}",
        '{"refresh_token": "1//abcdefghijklmnop", "x": 1}': (
            '{"refresh_token": "[redacted]", "x": 1}'
        ),
        "grant_type=refresh_token&client_secret=abc123&refresh_token=zzz": (
            "grant_type=refresh_token&client_secret=[redacted]&refresh_token=[redacted]"
        ),
        "GET /v1/x?key=AIzaSyD-abc&alt=json": "GET /v1/x?key=[redacted]&alt=json",
        "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----": "[redacted]",
        "state READY, 4 workers": "state READY, 4 workers",  # what is not a credential stays
    }
    for text, expected in cases.items():
        assert redact.scrub(text) == expected
