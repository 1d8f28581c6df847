"""An MCP stdio server written by hand (no SDK), for the answers an SDK server never sends: a JSON-RPC error reply
to `tools/call`, a line the client library cannot parse, a huge image. It speaks the 2025-11-25 `initialize`
handshake and starts in a few milliseconds.

Run as `python raw_server.py [--record DIR] [--child] [--image-chars N]`. --record writes DIR/<pid>.json
({"pid": ..., "child": ...}); --child starts `sleep 3600` (a process of the server's own, e.g. a worker or a shell
command) and records its pid; --image-chars is the length of the image tool's base64 data (default 200,000).

Tools (no arguments unless named):
  count          the number of calls to count so far in this process (its state)
  rpc_error      answers with the JSON-RPC error -32000 "the warehouse is closed"
  unparseable    answers with a line holding a lone surrogate escape (\\ud800), which JSON allows but MCP clients
                 reject
  garbage        answers with a line that is not JSON at all
  image(chars)   a PNG image content of `chars` (default --image-chars) characters of base64
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

parser = argparse.ArgumentParser()
parser.add_argument("--record")
parser.add_argument("--child", action="store_true")
parser.add_argument("--image-chars", type=int, default=200_000)
options = parser.parse_args()

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS = [
    {"name": name, "description": f"the {name} tool", "inputSchema": NO_ARGS}
    for name in ("count", "rpc_error", "unparseable", "garbage")
] + [
    {
        "name": "image",
        "description": "a PNG image",
        "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}},
    }
]
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

child = subprocess.Popen(["sleep", "3600"]) if options.child else None
if options.record:
    record = {"pid": os.getpid(), "child": child.pid if child else None}
    (Path(options.record) / f"{os.getpid()}.json").write_text(json.dumps(record))

out = sys.stdout.buffer
calls = 0


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> None:
    global calls
    if name == "count":
        calls += 1
        answer(request_id, text(str(calls)))
    elif name == "rpc_error":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "the warehouse is closed"}})
    elif name == "unparseable":
        out.write(
            b'{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "\\ud800"}]}}\n'
            % json.dumps(request_id).encode()
        )
        out.flush()
    elif name == "garbage":
        out.write(b"this is not JSON\n")
        out.flush()
    elif name == "image":
        chars = int(arguments.get("chars", options.image_chars))
        data = base64.b64encode(PNG + b"\0" * max(0, chars * 3 // 4 - len(PNG))).decode()
        answer(request_id, {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"unknown tool {name}"}})


for line in sys.stdin.buffer:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # notifications
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "segue-raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        answer(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        params = message.get("params") or {}
        call(request_id, params.get("name"), params.get("arguments") or {})
    elif method == "ping":
        answer(request_id, {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
