"""Compute Engine's batch endpoint (`POST /batch/compute/v1`, also beta and alpha):
gcloud sends several calls in one `multipart/mixed` request when a command names more
than one resource (`instances delete a b`). Each part is an `application/http` request;
the answer has one part per request, `Content-ID: <response-ID>`, in the same order,
each with its own status line and JSON body (Google's batch format:
https://cloud.google.com/compute/docs/api/how-tos/batch).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import secrets
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpuctl.emulator.core import api_call
from tpuctl.emulator.core.backend import BackendCore as Backend
from tpuctl.emulator.core.errors import ApiError, invalid_argument

PREFIX = "/batch/compute/"


def _parts(content_type: str, raw: bytes) -> list[tuple[str, bytes]]:
    """The (Content-ID, embedded HTTP request) of each part."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw
    )
    if not message.is_multipart():
        raise invalid_argument("A batch request must be multipart/mixed.")
    out = []
    for part in message.iter_parts():
        payload = part.get_payload(decode=True)
        out.append(
            (str(part.get("Content-ID", "")), payload if isinstance(payload, bytes) else b"")
        )
    return out


def _one(backend: Backend, request: bytes, authorization: str | None) -> tuple[int, Any]:
    head, _, body_bytes = request.replace(b"\r\n", b"\n").partition(b"\n\n")
    method, target, *_ = head.split(b"\n", 1)[0].decode().split()
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    try:
        body = json.loads(body_bytes) if body_bytes.strip() else {}
        return 200, api_call.call(backend, method, url.path, query, body, target, authorization)
    except ApiError as exc:
        return exc.http, exc.to_dict()
    except ValueError as exc:
        return 400, invalid_argument(f"Invalid JSON payload received. {exc}").to_dict()


def respond(
    backend: Backend, content_type: str, raw: bytes, authorization: str | None
) -> tuple[str, bytes]:
    """The multipart answer (its Content-Type, its bytes) to a batch request."""
    boundary = f"batch_{secrets.token_hex(12)}"
    chunks = []
    for content_id, request in _parts(content_type, raw):
        status, payload = _one(backend, request, authorization)
        data = json.dumps(payload)
        reason = HTTPStatus(status).phrase
        response_id = content_id.replace("<", "<response-", 1) if content_id else ""
        chunks.append(
            f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: {response_id}\r\n\r\n"
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(data)}\r\n\r\n{data}\r\n"
        )
    chunks.append(f"--{boundary}--\r\n")
    return f"multipart/mixed; boundary={boundary}", "".join(chunks).encode()
