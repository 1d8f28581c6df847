"""`segue serve --http` connection slots and request framing (issue 24, N12): clients that never send a request
cannot hold every slot, a burst past the open-file limit is one log line, and a request whose body length is
ambiguous (two Content-Length headers, or Content-Length with Transfer-Encoding) is refused."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests._support.protocol_harness import LIST, serve_command
from tests._support.protocol_http import ACME, TOKENS, open_sending, post, status_of, tokens_config, write
from tests._support.protocol_http import http_server as serve

HEAD = "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_clients_without_a_request_cannot_hold_every_slot(tmp_path: Path) -> None:
    """With tokens, three silent connections took all three slots and a valid token got 503 for 30 s."""
    config = write(tmp_path, {**tokens_config(), "max_connections": 3, "request_timeout_seconds": 30})
    with serve(config, env=TOKENS) as address:
        for _ in range(2):
            silent = open_sending(address, b"")
            half = open_sending(address, HEAD.encode())  # a head that never ends
            unknown = open_sending(
                address, (HEAD + "Authorization: Bearer nope\r\nContent-Length: 2\r\n\r\n{}").encode()
            )
            assert status_of(unknown) == 401, "a wrong token is answered at once and frees its slot"
            stalled = open_sending(address, b"POST /rpc HTTP/1.1\r\n")
            time.sleep(0.3)
            status, listed = post(address, {**LIST, "id": 1}, headers=ACME)
            assert status == 200 and listed["result"] == {"runs": []}, (status, listed)
            # The one that had waited longest gave its slot up, with a 503 saying why.
            assert status_of(silent) == 503
            for sock in (silent, half, unknown, stalled):
                sock.close()


def test_served_requests_keep_their_slots(tmp_path: Path) -> None:
    """Only connections without a request give way: requests being served are never closed for a newcomer."""
    config = write(tmp_path, {"max_connections": 2, "request_timeout_seconds": 2.0})
    body = HEAD + "Content-Length: 100\r\n\r\n{"  # a complete head; the body arrives slowly
    with serve(config) as address:
        slow = [open_sending(address, body.encode()) for _ in range(2)]
        time.sleep(0.3)
        refused = open_sending(address, b"")
        assert status_of(refused) == 503
        assert [status_of(s) for s in slow] == [408, 408]
        for sock in (*slow, refused):
            sock.close()


def test_a_connection_burst_past_the_open_file_limit_is_one_log_line(tmp_path: Path) -> None:
    """With 64 files, 300 connections at once logged a traceback per failed accept (231 in the issue)."""
    config = write(tmp_path)

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    proc = subprocess.Popen(
        serve_command(config, "--http", "--port", "0"),
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
        env=dict(os.environ),
        preexec_fn=limit_files,
    )
    burst: list[socket.socket] = []
    try:
        assert proc.stderr is not None
        found = re.search(r"http://([\d.]+):(\d+)/rpc", proc.stderr.readline())
        assert found
        address = (found.group(1), int(found.group(2)))
        assert post(address, {**LIST, "id": 0})[0] == 200  # the store is open before the burst takes the files
        for _ in range(300):
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.connect(address)
            except BlockingIOError:
                pass
            burst.append(sock)
        time.sleep(3)
        status, listed = post(address, {**LIST, "id": 1})
        assert status == 200 and listed.get("result") == {"runs": []}, (
            f"a real client is served during the burst: {listed}"
        )
        for sock in burst:
            sock.close()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        for sock in burst:
            sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert "Traceback" not in err, err[:2000]
    lines = [line for line in err.splitlines() if "cannot accept connections" in line]
    assert len(lines) == 1 and "open-file limit 64" in lines[0], err[:2000]


def _ask(address: tuple[str, int], head: str) -> tuple[int, bytes]:
    """The status of a raw request, and what the server sent after its response (b'' when it closed)."""
    body = json.dumps({**LIST, "id": 1})
    sock = socket.create_connection(address, timeout=30)
    sock.sendall((head.replace("{n}", str(len(body))) + body).encode())
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    return int(data.split()[1]), data


def test_ambiguous_body_lengths_are_refused(tmp_path: Path) -> None:
    """RFC 9112 section 6.3: "If a message is received with both a Transfer-Encoding and a Content-Length header
    field, the Transfer-Encoding overrides the Content-Length. Such a message might indicate an attempt to perform
    request smuggling ... and ought to be handled as an error"; several Content-Length fields make the framing
    invalid ("the server MUST respond with a 400 (Bad Request) status code and then close the connection")."""
    with serve(write(tmp_path)) as address:
        twice = HEAD + "Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n"
        status, data = _ask(address, twice)
        assert status == 400 and b"more than one Content-Length" in data, data
        both = HEAD + "Content-Length: {n}\r\nTransfer-Encoding: chunked\r\n\r\n"
        status, data = _ask(address, both)
        assert status == 400 and b"both Content-Length and Transfer-Encoding" in data, data
        chunked = HEAD + "Transfer-Encoding: chunked\r\n\r\n"
        status, data = _ask(address, chunked)
        assert status == 411 and b"chunked bodies are not accepted" in data, data
        status, data = _ask(address, HEAD + "Content-Length: {n}\r\n\r\n")
        assert status == 200 and b'"runs":[]' in data, data
