"""LSP's base protocol: each message is `Content-Length: N\\r\\n\\r\\n` followed by N bytes of UTF-8 JSON.

A bad frame never ends the session. The reader reports it as a `FrameError` (with the request id when one can be
recovered from the body) and resynchronises on the next header, so the server answers ParseError and keeps
serving:

- a header block without a usable Content-Length is skipped whole;
- bytes glued in front of a header (what a too-short Content-Length leaves behind) are reported, and the header
  that follows them is read normally;
- a too-long Content-Length swallows the start of the next frame: the JSON value at the front of the body is
  reported with its id, and the rest goes back to the buffer as the next frame;
- a body that cannot be decoded at all (nested deeper than the decoder recurses, say) is that frame's error.

`encode_message` is the one way out for every transport: a message that cannot be encoded as it is (a request
id holding a lone surrogate, a value JSON cannot carry) becomes an ASCII-escaped body or that request's error
response, never an exception that stops the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import attrs

MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
_SEPARATOR = b"\r\n\r\n"
_LENGTH_AT = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_READ_SIZE = 64 * 1024


@attrs.frozen(kw_only=True)
class FrameError:
    """A frame that could not be read. `request_id` is the id of the request inside it, when it could be found."""

    message: str
    request_id: str | int | None = None


log = logging.getLogger("segue.protocol")
INTERNAL_ERROR = -32603


def encode_message(message: Any) -> bytes | None:
    """A message as compact UTF-8 JSON. Text UTF-8 cannot carry (a lone surrogate, echoed from a request id)
    goes out with JSON's ASCII escapes instead; a message that cannot be encoded at all becomes an error
    response to its request, or, for a notification, is dropped (None) with a log line."""
    try:
        return _dumps(message, ascii_only=False)
    except UnicodeEncodeError:
        return _dumps(message, ascii_only=True)
    except Exception as e:  # NaN, a value JSON has no form for, nesting too deep: this message's error alone
        problem = f"the server could not encode its reply: {type(e).__name__}: {e}"
        if not isinstance(message, dict) or "id" not in message:
            log.error("dropping a notification: %s", problem)
            return None
        reply = {"jsonrpc": "2.0", "id": _id_of(message), "error": {"code": INTERNAL_ERROR, "message": problem}}
        return _dumps(reply, ascii_only=True)


def _dumps(message: Any, *, ascii_only: bool) -> bytes:
    text = json.dumps(message, ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def encode_frame(message: Any) -> bytes | None:
    """One message as a frame: compact UTF-8 JSON behind its Content-Length header (None: nothing to send)."""
    body = encode_message(message)
    if body is None:
        return None
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class _EndOfInput:
    def __repr__(self) -> str:
        return "END_OF_INPUT"


#: What `FrameReader.read()` returns once the input has ended. Not None: a frame whose body is `null` decodes to
#: None, and that is one bad message (Invalid Request), not the end of the session.
END_OF_INPUT: Any = _EndOfInput()


class FrameReader:
    """Reads frames from an asyncio stream: `async for item in reader` gives each decoded JSON value (any value,
    `null` included) or FrameError; `read()` gives one, or END_OF_INPUT once the input has ended."""

    def __init__(self, stream: asyncio.StreamReader, *, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._eof = False
        self.max_body_bytes = max_body_bytes

    async def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = await self._stream.read(_READ_SIZE)
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def __aiter__(self) -> FrameReader:
        return self

    async def __anext__(self) -> Any | FrameError:
        item = await self.read()
        if item is END_OF_INPUT:
            raise StopAsyncIteration
        return item

    async def read(self) -> Any | FrameError:
        end = self._buf.find(_SEPARATOR)
        while end < 0:
            if len(self._buf) > MAX_HEADER_BYTES:
                shown = bytes(self._buf[:60])
                del self._buf[: self._buf.rfind(b"\n") + 1 or len(self._buf)]
                return FrameError(message=f"no frame header within {MAX_HEADER_BYTES} bytes (starting {shown!r})")
            if not await self._fill():
                if self._buf.strip():
                    rest = bytes(self._buf[:60])
                    self._buf.clear()
                    return FrameError(message=f"the input ended inside a frame header ({rest!r})")
                return END_OF_INPUT
            end = self._buf.find(_SEPARATOR)
        # Blank lines between frames are tolerated (some clients end a body with a newline).
        header = bytes(self._buf[:end]).lstrip(b"\r\n\t ")
        del self._buf[: end + len(_SEPARATOR)]

        found = [m.start() for m in _LENGTH_AT.finditer(header)]
        if found and found[-1] > 0 and not _header_lines(header[: found[-1]]):
            # Bytes in front of the header: the leftovers of a body shorter than its Content-Length said.
            start = found[-1]
            self._buf[0:0] = header[start:] + _SEPARATOR
            return FrameError(
                message=f"{start} stray bytes before a frame header ({header[:start][:60]!r}); "
                "a previous Content-Length was probably too short"
            )
        length = _content_length(header)
        if isinstance(length, FrameError):
            return length
        if length > self.max_body_bytes:
            await self._skip(length)
            return FrameError(message=f"Content-Length {length} is over the limit of {self.max_body_bytes} bytes")
        while len(self._buf) < length:
            if not await self._fill():
                got = len(self._buf)
                self._buf.clear()
                return FrameError(
                    message=f"the input ended after {got} of the {length} body bytes Content-Length announced"
                )
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return self._decode(body, length)

    async def _skip(self, length: int) -> None:
        remaining = length
        while True:
            take = min(remaining, len(self._buf))
            del self._buf[:take]
            remaining -= take
            if remaining == 0 or not await self._fill():
                return

    def _decode(self, body: bytes, length: int) -> Any | FrameError:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            return FrameError(message=f"the body is not UTF-8: {e}")
        try:
            return json.loads(text)
        except RecursionError:
            return FrameError(message=f"the body is nested too deeply to decode ({length} bytes); flatten it")
        except json.JSONDecodeError as e:
            error = e
        except Exception as e:  # whatever else decoding raises is this frame's error, never the server's end
            return FrameError(message=f"the body could not be decoded: {type(e).__name__}: {e}")
        try:
            value, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
        except (json.JSONDecodeError, RecursionError):
            return FrameError(message=f"the body is not JSON ({error}); check Content-Length ({length} bytes)")
        rest = text[end:]
        request_id = _id_of(value)
        if _LENGTH_AT.match(rest.lstrip().encode("utf-8")):
            # The announced length ran into the next frame: keep that frame for the next read.
            self._buf[0:0] = rest.lstrip().encode("utf-8")
            used = len(text[:end].encode("utf-8"))
            return FrameError(
                message=f"Content-Length {length} is longer than the JSON body ({used} bytes); "
                "the frame was not processed",
                request_id=request_id,
            )
        return FrameError(message=f"the body has data after its JSON value: {rest[:40]!r}", request_id=request_id)


def _content_length(header: bytes) -> int | FrameError:
    try:
        text = header.decode("ascii")
    except UnicodeDecodeError:
        return FrameError(message=f"the frame header is not ASCII: {header[:60]!r}")
    lengths: list[str] = []
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name != name.strip():
            return FrameError(message=f"bad frame header line {line[:60]!r}; expected 'Content-Length: N'")
        if name.lower() == "content-length":
            lengths.append(value.strip())
    if not lengths:
        return FrameError(message=f"the frame header has no Content-Length: {text[:80]!r}")
    if len(set(lengths)) > 1:
        return FrameError(message=f"the frame header has conflicting Content-Length values {lengths}")
    if not lengths[0].isdigit() or not lengths[0].isascii():
        return FrameError(message=f"Content-Length {lengths[0][:20]!r} is not a whole number of bytes")
    return int(lengths[0])


def _header_lines(data: bytes) -> bool:
    """Whether `data` is complete `Name: value` header lines (what may precede Content-Length in a header)."""
    return data.endswith(b"\r\n") and all(
        re.fullmatch(rb"[A-Za-z0-9-]+:[^\r\n]*", line) for line in data[:-2].split(b"\r\n")
    )


def _id_of(value: Any) -> str | int | None:
    found = value.get("id") if isinstance(value, dict) else None
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None
