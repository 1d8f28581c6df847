"""httpx2 transports that hand requests to a `Twin` in-process: the official clients run unchanged on top."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Protocol

import anyio.lowlevel
import httpx2


class Answer(Protocol):
    """What the twin answers a request with (segue_twin.core.TwinResponse)."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def chunks(self) -> tuple[bytes, ...]: ...
    def begin(self) -> None: ...


class Handler(Protocol):
    """What a transport hands requests to (segue_twin.core.Twin): the transports need nothing else of it, so this
    module imports nothing of the twin and the twin imports it without a circle."""

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, *, begun: bool = True
    ) -> Answer: ...


class _AsyncChunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _SyncChunks(httpx2.SyncByteStream):
    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks


def _headers(request: httpx2.Request) -> dict[str, str]:
    return {key: value for key, value in request.headers.items()}


def _path(request: httpx2.Request) -> str:
    return request.url.path


class TwinAsyncTransport(httpx2.AsyncBaseTransport):
    """Async transport: `httpx2.AsyncClient(transport=twin.transport())`."""

    def __init__(self, twin: Handler) -> None:
        self.twin = twin

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        answer = self.twin.handle(request.method, _path(request), _headers(request), body, begun=False)
        # The response begins after the other tasks had their turn: requests sent concurrently (asyncio.gather)
        # arrive before it and write the same entries again, as a real fan-out does; a sequential caller's next
        # request comes after it and reads them.
        await anyio.lowlevel.checkpoint()
        answer.begin()
        return _response(answer, request, stream=_AsyncChunks(answer.chunks))


class TwinSyncTransport(httpx2.BaseTransport):
    """Sync transport: `httpx2.Client(transport=twin.sync_transport())`."""

    def __init__(self, twin: Handler) -> None:
        self.twin = twin

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        answer = self.twin.handle(request.method, _path(request), _headers(request), body)
        return _response(answer, request, stream=_SyncChunks(answer.chunks))


def _response(
    answer: Answer, request: httpx2.Request, *, stream: httpx2.AsyncByteStream | httpx2.SyncByteStream
) -> httpx2.Response:
    return httpx2.Response(answer.status, headers=list(answer.headers), stream=stream, request=request)
