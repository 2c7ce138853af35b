"""An HTTP endpoint that answers every request 503 and records it: where a test must prove that a command sent
nothing (no request, so no signature with the user's access key) to an endpoint a study directory names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def recording_endpoint() -> Iterator[tuple[str, list[str]]]:
    """(endpoint URL, the requests it received as `METHOD path authorization`), for the block."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def _any(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(f"{self.command} {self.path} {self.headers.get('Authorization', '')}")
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
