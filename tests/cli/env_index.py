"""A package index on 127.0.0.1 for the environment tests: wheels written in the test from
tiny packages (a wheel is a zip: no build backend, no network), served as a PEP 503
"simple" index by http.server in a thread, every request counted."""

from __future__ import annotations

import base64
import hashlib
import stat
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def write_wheel(folder: Path, name: str, version: str, code: str, requires: list[str]) -> Path:
    """A pure-Python wheel of module `name` holding `code`, depending on `requires`."""
    dist = f"{name}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    files = {
        f"{name}/__init__.py": code.encode(),
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    return pack(path, dist, files)


def pack(path: Path, dist: str, files: dict[str, bytes], executable: tuple[str, ...] = ()) -> Path:
    """`files` zipped as a wheel at `path`, with its RECORD (`dist`: `name-version`);
    the members named in `executable` marked as executable regular files."""
    record = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files = {**files, f"{dist}.dist-info/RECORD": ("\n".join(record) + "\n").encode()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            info = zipfile.ZipInfo(arc)
            info.external_attr = (stat.S_IFREG | (0o755 if arc in executable else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return path


@dataclass
class Index:
    url: str  # .../simple
    folder: Path
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def add(self, name: str, version: str, code: str, requires: list[str] | None = None) -> Path:
        return write_wheel(self.folder, name, version, code, requires or [])


@contextmanager
def serving(folder: Path) -> Iterator[Index]:
    """The wheels in `folder` as an index at http://127.0.0.1:PORT/simple (and at
    http://127.0.0.1:PORT/ANY-TOKEN/simple, as a private index with a token in its path)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = Index("", folder)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            with index.lock:
                index.requests.append(self.path)
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            # a private index's token in the path (/TOKEN/simple/...): kept in the links
            token = f"/{parts.pop(0)}" if parts and parts[0] not in ("simple", "files") else ""
            body, kind = b"", "text/html"
            if len(parts) == 2 and parts[0] == "simple":
                project = parts[1].lower().replace("_", "-")
                wheels = [
                    w
                    for w in sorted(folder.glob("*.whl"))
                    if w.name.split("-")[0].lower().replace("_", "-") == project
                ]
                links = [
                    f'<a href="{token}/files/{w.name}'
                    f'#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>'
                    for w in wheels
                ]
                if links:
                    body = ("<html><body>" + "".join(links) + "</body></html>").encode()
            elif len(parts) == 2 and parts[0] == "files" and (folder / parts[1]).is_file():
                body, kind = (folder / parts[1]).read_bytes(), "application/octet-stream"
            if not body:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
