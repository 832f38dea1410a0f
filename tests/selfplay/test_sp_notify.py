"""The Discord webhook: a local HTTP server receives the post; a dead endpoint fails quickly and quietly."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from rich.console import Console

from speedflip.train.notify import WEBHOOK_ENV, milestone_text, post_milestone, post_webhook


class _Server:
    def __init__(self, status: int) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.received.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server(204)
    yield s
    s.close()


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once the socket is closed


def test_post_reaches_the_server(server: _Server) -> None:
    assert post_webhook(server.url, "hello from speedflip", timeout_seconds=5.0) is None
    assert len(server.received) == 1
    path, content_type, body = server.received[0]
    assert path == "/hook" and content_type == "application/json"
    assert json.loads(body) == {"content": "hello from speedflip"}


def test_http_error_status_is_reported() -> None:
    failing = _Server(500)
    try:
        failure = post_webhook(failing.url, "x", timeout_seconds=5.0)
    finally:
        failing.close()
    assert failure is not None and "500" in failure


def test_closed_port_fails_fast_without_raising() -> None:
    start = time.perf_counter()
    failure = post_webhook(f"http://127.0.0.1:{_closed_port()}/hook", "x", timeout_seconds=5.0)
    assert time.perf_counter() - start < 3.0
    assert isinstance(failure, str) and failure  # e.g. "URLError: <urlopen error [Errno 111] Connection refused>"
    assert "refused" in failure.lower() or "error" in failure.lower()


@pytest.mark.parametrize("url", ["not a url", "discord.com/api/webhooks/1/abc", "ftp://127.0.0.1:1/x"])
def test_malformed_url_is_a_failure_not_an_exception(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a webhook URL pasted without its https:// scheme must not stop training at the first milestone
    failure = post_webhook(url, "x", timeout_seconds=2.0)
    assert isinstance(failure, str) and failure
    monkeypatch.setenv(WEBHOOK_ENV, url)
    out = io.StringIO()
    post_milestone(None, {}, 1000.0, Console(file=out, width=200))
    assert "webhook post failed" in out.getvalue()


def test_post_milestone_uses_the_environment(server: _Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200)
    meta = {"phase": "main", "episode_reward_mean": 1.23456, "touches_per_minute": 2.0, "entropy": None}

    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    post_milestone(tmp_path / "4096", meta, 1012.4, console)
    assert server.received == [] and out.getvalue() == ""  # no URL: nothing happens

    monkeypatch.setenv(WEBHOOK_ENV, server.url)
    post_milestone(tmp_path / "4096", meta, 1012.4, console)
    assert len(server.received) == 1
    content = json.loads(server.received[0][2])["content"]
    assert content == milestone_text(tmp_path / "4096", meta, 1012.4)
    assert "4096" in content and "(main)" in content and "reward 1.23" in content
    assert "entropy -" in content and "Elo 1012" in content
    assert out.getvalue() == ""  # success is silent

    monkeypatch.setenv(WEBHOOK_ENV, f"http://127.0.0.1:{_closed_port()}/hook")
    post_milestone(tmp_path / "8192", meta, 1000.0, console)  # must not raise
    assert "webhook post failed" in out.getvalue() and "training goes on" in out.getvalue()
