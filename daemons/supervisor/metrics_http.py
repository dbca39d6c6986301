"""The supervisor's HTTP endpoint, in a thread: Prometheus `/metrics`, and `/healthz` (503 while any is unhealthy)."""

from __future__ import annotations

import errno
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from tandem.daemons.supervisor.prometheus import SnapshotCollector

log = logging.getLogger(__name__)
STALE_S = 10.0  # a snapshot this old means the supervisor's loop is stuck: unhealthy, whatever it last said
REQUEST_TIMEOUT_S = 5.0


class MetricsPortBusy(RuntimeError):
    """The configured port cannot be bound."""


def health(snapshot: dict | None, now: float) -> tuple[int, dict]:
    """The status code and body of /healthz for `snapshot` (None: none published yet)."""
    if snapshot is None:
        return 503, {"healthy": False, "reason": "starting"}
    age_s = now - snapshot["published"]
    if age_s > STALE_S:
        return 503, {"healthy": False, "reason": f"the supervisor's loop has published nothing for {age_s:.0f} s"}
    unhealthy = list(snapshot["status"]["unhealthy"])
    if unhealthy:
        reasons = snapshot["status"].get("unhealthy_reasons", {})
        reason = "; ".join(f"{name}: {reasons.get(name, 'FATAL or hung')}" for name in unhealthy)
        return 503, {"healthy": False, "reason": reason, "unhealthy": unhealthy}
    return 200, {"healthy": True, "unhealthy": []}


class MetricsServer:
    """Serves the latest published snapshot; `publish()` from the main loop, `close()` on shutdown."""

    def __init__(self, host: str, port: int, key: str = "supervisor.metrics_port"):
        self._snapshot: dict | None = None  # replaced whole, never mutated: the server thread only reads it
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(lambda: self._snapshot))
        handler = type("Handler", (_Handler,), {"owner": self})
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            why = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound: {exc.strerror or exc}"
            raise MetricsPortBusy(f"{key} = {port} on {host} {why}; pick another port or leave {key} unset") from exc
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address[:2]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="metrics-http", daemon=True
        )
        self.thread.start()
        log.info("metrics on http://%s:%d/metrics, health on /healthz", *self.address)

    def publish(self, snapshot: dict) -> None:
        """Hand a new snapshot to the server thread: one reference assignment, atomic under the GIL."""
        self._snapshot = {**snapshot, "published": time.monotonic()}

    def snapshot(self) -> dict | None:
        return self._snapshot

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop serving and join the thread (bounded: serve_forever polls every 0.2 s)."""
        done = threading.Event()
        stopper = threading.Thread(target=lambda: (self.httpd.shutdown(), done.set()), daemon=True)
        stopper.start()
        if not done.wait(timeout_s):
            log.warning("the metrics server did not stop within %.1f s", timeout_s)
        self.thread.join(timeout=max(0.0, timeout_s))
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    owner: MetricsServer
    timeout = REQUEST_TIMEOUT_S  # a client that connects and sends nothing cannot hold a thread forever

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.owner.registry))
        elif path in ("/healthz", "/health"):
            code, body = health(self.owner.snapshot(), time.monotonic())
            self._send(code, "application/json", json.dumps(body).encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's signature)
        log.debug("metrics http: " + format, *args)
