"""The emulator's HTTP servers' common base: threads per connection, and a client that
went away mid-exchange taken as what it is."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-exchange (a reader that stopped at its bound closes
        its connection) is no error of the server's: socketserver's traceback is kept for
        the rest."""
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)
