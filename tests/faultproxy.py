"""A fault-injecting HTTP proxy for the S3 tests (127.0.0.1 only, bounded).

Forwards each request to ``upstream`` (the moto server) and, for a fraction ``rate`` of
requests, injects one fault chosen at random: ``503`` (an S3 ``SlowDown`` reply), ``reset``
(the connection closed with RST before any reply), ``truncate`` (the reply's headers
announce the full body, half of it is sent, then the connection closes) or ``latency``
(the reply is delayed by ``delay`` seconds).  ``counts`` records what was injected.
``403`` (an S3 ``InvalidAccessKeyId`` reply — the credentials rejected) is available but not
among the default faults.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("503", "reset", "truncate", "latency")
KINDS = FAULTS + ("403",)
SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code>'
    b"<Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>"
)


class FaultProxy:
    def __init__(
        self, upstream: str, rate: float = 0.0, faults=FAULTS, delay: float = 0.2, seed: int = 0
    ):
        self.upstream = urlsplit(upstream)
        self.rate, self.faults, self.delay = rate, tuple(faults), delay
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {f: 0 for f in KINDS} | {"requests": 0}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _any(self):
                proxy.handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def _pick(self) -> str | None:
        with self.lock:
            self.counts["requests"] += 1
            if self.random.random() >= self.rate:
                return None
            fault = self.random.choice(self.faults)
            self.counts[fault] += 1
            return fault

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        fault = self._pick()
        if fault == "reset":
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            h.connection.close()
            return
        if fault in ("503", "403"):
            status, reason, body = (
                (503, "Slow Down", SLOWDOWN) if fault == "503" else (403, "Forbidden", DENIED)
            )
            h.send_response(status, reason)
            h.send_header("Content-Type", "application/xml")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(body)
            return
        if fault == "latency":
            time.sleep(self.delay)
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            headers = {
                k: v
                for k, v in h.headers.items()
                if k.lower() not in ("connection", "proxy-connection")
            }
            conn.request(h.command, h.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        h.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in (
                "transfer-encoding",
                "connection",
                "content-length",
                "server",
                "date",
            ):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if fault == "truncate" and h.command != "HEAD" and len(data) > 1:
            h.wfile.write(data[: len(data) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if h.command != "HEAD":
            h.wfile.write(data)
