"""What the four official-SDK drivers share: the call / stream skeleton and SDK exception -> ProviderError.

A driver supplies the wire (build, parse, stream assembler) and the two SDK calls; this module turns the result
into a ProviderResponse and every failure into a ProviderError that says what happened and what to do. The
official clients are imported only by the driver constructors, never at `import segue.providers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any, Protocol

from segue._core.contracts import (
    SDK_SPAN_GLOBAL,
    TWIN_HEADER,
    TWIN_NOTE_HEADER,
    Provider,
    ProviderNote,
    ProviderRequest,
    ProviderResponse,
    StreamDelta,
    StreamDone,
    StreamEvent,
)
from segue.errors import MalformedResponseError, ProviderError, ProviderErrorKind
from segue.generated import ModelSettings, ServedBy
from segue.providers._cache import CatalogRows
from segue.providers._errors import provider_error, retried, stream_error, transport_error
from segue.providers._output import OutputPaths
from segue.wire.common import BodyEncoder, ParsedResponse, WireRequest

#: The official clients' INITIAL_RETRY_DELAY (anthropic._constants, openai._constants: 0.5 s).
_FIRST_RETRY_DELAY = 0.5


class Assembler(Protocol):
    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]: ...

    def result(self) -> dict[str, Any]: ...


class SdkDriver(Provider):
    """The call and stream skeleton every official-SDK driver shares; subclasses provide the vendor hooks."""

    vendor: str
    model: str
    requires_stable_reasoning_prefix: bool
    #: The official SDK module (anthropic / openai), for its exception classes.
    _sdk: ModuleType
    #: The official client the driver calls (`anthropic.AsyncAnthropic`, `openai.AsyncOpenAI`).
    client: Any
    #: Which structured-output mechanism each model's path uses; its catalog rows answer other lookups too.
    output: OutputPaths

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        raise NotImplementedError

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, wire: WireRequest) -> ParsedResponse:
        raise NotImplementedError

    #: The API route the driver's calls post to, after the client's base_url ("/v1/messages", "/responses").
    _route: str

    def _answer_types(self) -> tuple[Any, Any]:
        """The SDK's types of the route's answer and of its stream's events: what its typed `create()` hands the
        client's `post`, so a stream yields the SDK's own event objects either way."""
        raise NotImplementedError

    def _resource(self) -> Any:
        """The SDK resource whose typed `create()` calls the route (`client.messages`, `client.responses`)."""
        raise NotImplementedError

    async def _create(self, kwargs: dict[str, Any]) -> Any:
        """The SDK's typed raw-response call."""
        return await self._resource().with_raw_response.create(**kwargs)

    async def _create_stream(self, kwargs: dict[str, Any]) -> Any:
        """The SDK's typed stream of events (`stream=True` is in the kwargs)."""
        return await self._resource().create(**kwargs)

    @functools.cached_property
    def _encoder(self) -> BodyEncoder:
        return BodyEncoder()

    def _plain_client(self) -> type:
        """The SDK's own async client class (`anthropic.AsyncAnthropic`, `openai.AsyncOpenAI`)."""
        raise NotImplementedError

    def _posts_bytes(self) -> bool:
        """Whether calls post segue's bytes (see `_post`): only through the SDK's own client class, whose `post`
        sends a body as it is, and only when the client's own spans are not recorded. A subclass may build the
        URL from the typed call's body (Azure OpenAI and Anthropic on Bedrock or Vertex name the deployment or
        model in the path), so it gets the typed call."""
        return type(self.client) is self._plain_client() and not sdk_spans_recorded(self.client)

    def _post_options(self, wire: WireRequest, *, model: str, stream: bool) -> dict[str, Any]:
        """The client's request options for a call that posts segue's bytes: the headers segue sets."""
        return {"headers": dict(wire.headers)} if wire.headers else {}

    async def _post(self, wire: WireRequest, model: str, *, retries: int | None = None) -> Any:
        """One call, answered as the client's `httpx2.Response`; a failure raises the SDK's own error.

        A client whose own spans are recorded goes through the SDK's typed `create()`, whose arguments those spans
        read (the anthropic SDK's `open_telemetry` option), and so does a client of another class than the SDK's
        own (`_posts_bytes`). Otherwise the driver posts the bytes segue encoded
        (BodyEncoder: `WireRequest.encoded`'s bytes, which the stored body re-encodes to) with the same client:
        its typed `create()` would copy the whole body once more on every call (anthropic's `copy_tree`, openai's
        `transform`) and encode it again, which at a long conversation's size costs more than all the rest segue
        does per call (bench/replay.py)."""
        if not self._posts_bytes():
            return (await self._create(wire.sdk_kwargs())).http_response
        import httpx2

        options = self._post_options(wire, model=model, stream=False)
        if retries is not None:
            options["max_retries"] = retries
        return await self.client.post(
            self._route, content=self._encoder.encode(wire.body), cast_to=httpx2.Response, options=options
        )

    async def _open_stream(self, wire: WireRequest, model: str, *, retries: int | None = None) -> Any:
        """The SDK's async stream of the call's events (the SDK's own event objects either way)."""
        if not self._posts_bytes():
            return await self._create_stream(wire.sdk_kwargs())
        answer, events = self._answer_types()
        options = self._post_options(wire, model=model, stream=True)
        if retries is not None:
            options["max_retries"] = retries
        return await self.client.post(
            self._route,
            content=self._encoder.encode(wire.body),
            cast_to=answer,
            stream=True,
            stream_cls=events,
            options=options,
        )

    def _assembler(self) -> Assembler:
        raise NotImplementedError

    def _model(self, request: ProviderRequest) -> str:
        return request.model or self.model

    def _rows(self) -> CatalogRows:
        """The driver's catalog rows, for telling a catalog alias from another model."""
        return self.output.rows

    def check_settings(self, settings: ModelSettings) -> None:
        """Raise WireError naming the first setting this driver's wire cannot take; the run pipeline calls it
        before anything is written."""
        raise NotImplementedError

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        wire = self._wire(request, stream=False)
        model = self._model(request)
        try:
            answer = await self._retrying(lambda retries: self._post(wire, model, retries=retries))
        except self._sdk.APIError as e:
            raise self._error(e, wire, model) from e
        try:
            data = answer.json()
        except ValueError as e:
            raise ProviderError(
                f"{self.vendor} answered with a body that is not JSON: {e}", vendor=self.vendor, kind="other"
            ) from e
        return self._response(data, request, wire, kind="other", served_by=served_by(answer), twin=twin_note(answer))

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        if request.prewarm:  # nothing is generated, so there is nothing to stream
            yield StreamDone(response=await self.complete(request))
            return
        wire = self._wire(request, stream=True)
        assembler = self._assembler()
        model = self._model(request)
        try:
            opened = await self._retrying(lambda retries: self._open_stream(wire, model, retries=retries))
            async with opened as events:
                server, twin = served_by(events.response), twin_note(events.response)
                async for event in events:
                    for delta in assembler.feed(event.to_dict()):
                        yield delta
            data = assembler.result()
        except ProviderError:
            raise
        except self._sdk.APIError as e:
            raise self._error(e, wire, model) from e
        except (MalformedResponseError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise stream_error(self.vendor, e) from e
        except Exception as e:
            mapped = transport_error(self.vendor, e)
            if mapped is None:
                raise
            raise mapped from e
        yield StreamDone(response=self._response(data, request, wire, kind="stream", served_by=server, twin=twin))

    async def _retrying(self, call: Callable[[int | None], Awaitable[Any]]) -> Any:
        """`call(retries)` once without the client's retries, then, for a failure the client would retry, with the
        rest (None: the client's own setting, where segue cannot count them); never for `model_output`."""
        retries = getattr(self.client, "max_retries", None)
        if not isinstance(retries, int) or retries < 1 or not self._posts_bytes():
            return await call(None)
        try:
            return await call(0)
        except (self._sdk.APIStatusError, self._sdk.APIConnectionError, self._sdk.APITimeoutError) as e:
            if not retried(e, self._sdk):
                raise
        # The SDKs wait INITIAL_RETRY_DELAY (and more) before a retry; the rest of the backoff is the client's.
        await asyncio.sleep(_FIRST_RETRY_DELAY)
        return await call(retries - 1)

    def _error(self, e: Exception, wire: WireRequest, model: str) -> ProviderError:
        """The SDK's exception as a ProviderError carrying the call's evidence (the request, the error body)."""
        error = provider_error(e, self.vendor, self._sdk)
        body = getattr(e, "body", None)
        response = e.response if isinstance(e, self._sdk.APIStatusError) else None
        with contextlib.suppress(ValueError):  # the whole error body (the SDKs' `body` is the inner error object)
            body = response.json() if response is not None else body
        error.request_body, error.response_body = wire.body, body if isinstance(body, dict) else None
        error.model = model
        return error

    def _response(
        self,
        data: Any,
        request: ProviderRequest,
        wire: WireRequest,
        *,
        kind: ProviderErrorKind,
        served_by: ServedBy,
        twin: ProviderNote | None = None,
    ) -> ProviderResponse:
        if not isinstance(data, dict):
            raise ProviderError(
                f"{self.vendor} answered with {type(data).__name__}, not a JSON object", vendor=self.vendor, kind=kind
            )
        try:
            parsed = self._parse(data, request, wire)
        except MalformedResponseError as e:
            if kind == "stream":
                raise stream_error(self.vendor, e) from e
            raise ProviderError(
                f"{self.vendor} response could not be read: {e}", vendor=self.vendor, kind=kind, vendor_message=str(e)
            ) from e
        notes = [*wire.notes, *parsed.notes, *([twin] if twin is not None else [])]
        if request.prewarm and parsed.message.content:
            notes.append(
                ProviderNote(
                    kind="prewarm-output",
                    message=f"{self.vendor} generated {len(parsed.message.content)} content block(s) for a prewarm "
                    "request, which should only populate the cache",
                )
            )
        model = self._model(request)
        served = parsed.served_model if other_model(model, parsed.served_model, self._rows()) else None
        if served is not None:
            notes.append(
                ProviderNote(
                    kind="served-model",
                    message=f"asked {self.vendor} for {model!r}, and {served!r} answered (the response's model); "
                    f"cost and catalog lookups use {served!r}. If the server ignores the request's model (llama.cpp "
                    "answers with the alias it was started with), name that model in the driver",
                )
            )
        if parsed.truncated_calls:
            notes.append(
                ProviderNote(
                    kind="output-truncated",
                    message=f"{self.vendor} cut the response at the output limit while it wrote a call to "
                    f"{', '.join(parsed.truncated_calls)}; that call was left out, the complete ones kept",
                )
            )
        return ProviderResponse(
            message=parsed.message,
            usage=parsed.usage,
            stop_reason=parsed.stop_reason,
            vendor=self.vendor,
            model=model,
            served_model=served,
            truncated_calls=parsed.truncated_calls,
            output_limit=wire.output_limit,
            request_body=wire.body,
            response_body=data,
            request_headers=dict(wire.headers),
            input_transformations=parsed.input_transformations,
            cache_verdict=parsed.cache_verdict,
            notes=notes,
            requires_stable_reasoning_prefix=self.requires_stable_reasoning_prefix,
            served_by=served_by,
            **client_telemetry(getattr(self, "client", None)),
        )


def served_by(http_response: Any) -> ServedBy:
    """ "twin" when segue's twin answered: it marks every response with TWIN_HEADER, which no vendor sends."""
    return "twin" if http_response.headers.get(TWIN_HEADER) else "vendor"


def twin_note(http_response: Any) -> ProviderNote | None:
    """What segue's twin did instead of what a model would have (TWIN_NOTE_HEADER), as a twin-note."""
    note = http_response.headers.get(TWIN_NOTE_HEADER)
    return ProviderNote(kind="twin-note", message=note) if note else None


def client_telemetry(client: Any) -> dict[str, Any]:
    """What a span of the client's request needs to know of it: the server it talks to (base_url) and whether
    the client emits its own span (the anthropic SDK's `open_telemetry` option, on by default) and to where."""
    out: dict[str, Any] = {}
    url = getattr(client, "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    if isinstance(host, str) and host:
        out["server_address"] = host
        scheme = getattr(url, "scheme", None)
        out["server_port"] = port if isinstance(port, int) else {"https": 443, "http": 80}.get(str(scheme))
    option = getattr(client, "open_telemetry", None)
    traces = option.get("traces") if isinstance(option, Mapping) else None
    if isinstance(traces, Mapping) and traces.get("enabled"):
        out["sdk_span"] = option.get("tracer_provider") or SDK_SPAN_GLOBAL  # type: ignore[union-attr]
    return out


def sdk_spans_recorded(client: Any) -> bool:
    """Whether the client's own spans of its calls are recorded: it emits them (`client_telemetry`) to a tracer
    provider the app passed, or to the global one once the app has set one (OpenTelemetry's default global
    provider records nothing)."""
    where = client_telemetry(client).get("sdk_span")
    if where is None:
        return False
    if where != SDK_SPAN_GLOBAL:
        return True
    try:
        from opentelemetry import trace
    except ImportError:  # the SDK emits no spans without OpenTelemetry
        return False
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


#: A dated snapshot id: the alias, a dash, a date (claude-sonnet-4-5-20250929, gpt-4o-2024-08-06).
_DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def other_model(asked: str, served: str | None, rows: CatalogRows | None) -> bool:
    """Whether a response's `model` names another model than the one asked for: not the same id, not a dated
    snapshot of it (the alias plus `-YYYYMMDD` or `-YYYY-MM-DD`), and not a catalog alias of the same model."""
    if not served or served == asked:
        return False
    dated = _DATED.search(served)
    if dated is not None and served[: dated.start()] == asked:
        return False
    if rows is not None:
        a, b = rows.resolve(asked), rows.resolve(served)
        if a is not None and b is not None and a.note is None and b.note is None and a.model == b.model:
            return False
    return True
