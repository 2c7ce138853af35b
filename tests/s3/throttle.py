"""A fault injector in front of the real server: the first N part uploads (or, `every` k, one request of any
kind in k) are answered 503 SlowDown (or 429) without reaching it, everything else is passed through unchanged
(the signature still holds: headers, Host included, are forwarded as sent). Not a mock of S3: every request
that succeeds is the server's answer."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


@contextmanager
def throttling_proxy(endpoint: str, refuse: int, status: int = 503, every: int = 0) -> Iterator[str]:
    """An endpoint URL that refuses the first `refuse` UploadPart requests with `status`, then passes through;
    with `every` k, it refuses the first of each k requests of any kind instead (every: 1 refuses all)."""
    upstream = urlsplit(endpoint)
    left, seen = [refuse], [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                if every:
                    refused, seen[0] = seen[0] % every == 0, seen[0] + 1
                else:
                    refused = self.command == "PUT" and "partNumber=" in self.path and left[0] > 0
                    left[0] -= refused
            if refused:
                return self._answer(status, {"Content-Type": "application/xml"}, SLOW_DOWN)
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
            conn.request(self.command, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            conn.close()
            passed = {k: v for k, v in answer.getheaders() if k.lower() not in ("transfer-encoding", "connection")}
            self._answer(answer.status, passed, data)

        def _answer(self, code: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(code)
            for k, v in headers.items():
                if k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
