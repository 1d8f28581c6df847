"""`Twin`: routes HTTP requests to the emulated endpoints and renders vendor-shaped errors.

Everything here is synchronous and guarded by one lock, so the in-process transports and the loopback server
share the same behaviour: one request at a time, and a cache entry written by a request is readable once its
response has begun (`TwinResponse.begin`): requests that arrive before that write it again, as on the vendors.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from segue_twin._wire import IdFactory
from segue_twin.anthropic_api import handle_messages
from segue_twin.app_policy import DefaultPolicy
from segue_twin.cache import Ticket
from segue_twin.errors import ErrorVendor, TwinHTTPError, model_not_found
from segue_twin.openai_chat import handle_chat
from segue_twin.openai_responses import handle_compact, handle_responses
from segue_twin.rules import CacheRules, rules_for
from segue_twin.state import Reply, RulesSource, TwinState
from segue_twin.view import Policy, PolicyError

if TYPE_CHECKING:
    import anthropic
    import openai

    from segue_twin.transport import TwinAsyncTransport, TwinSyncTransport

#: Largest request body accepted (Anthropic documents 32 MB for the Messages API); larger gets a 413.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: Fixed default secret, so signatures and encrypted reasoning are stable across Twin instances and runs.
DEFAULT_SECRET = b"segue-twin-default-secret"
#: The base URL the in-process clients use; the host is never resolved.
TWIN_BASE_URL = "http://twin.segue.invalid"
TWIN_API_KEY = "twin-key"
#: Header on every answer, so a client (segue's drivers record it) can never take the twin's answer for the
#: vendor's; segue._core.contracts.TWIN_HEADER is the same name (the twin imports no driver code).
TWIN_HEADER = "x-segue-twin"
_MARK = (TWIN_HEADER, "emulated")
#: A line the policy adds about what it did instead of what a model would have (AssistantTurn.note); segue
#: records it as a run note of kind twin-note. segue._core.contracts.TWIN_NOTE_HEADER is the same name.
TWIN_NOTE_HEADER = "x-segue-twin-note"

_log = logging.getLogger("segue.twin")

_ROUTES: dict[str, tuple[ErrorVendor, str]] = {
    "/v1/messages": ("anthropic", "messages"),
    "/v1/responses": ("openai", "responses"),
    "/v1/responses/compact": ("openai", "responses_compact"),
    "/v1/chat/completions": ("openai", "chat"),
    # Gemini's OpenAI compatibility (base_url "https://generativelanguage.googleapis.com/v1beta/openai/").
    "/v1beta/openai/chat/completions": ("gemini", "gemini_chat"),
}
#: The base URL path of Gemini's OpenAI-compatible endpoint on the twin (`Twin.gemini_client`).
GEMINI_BASE_PATH = "/v1beta/openai"


@attrs.frozen(kw_only=True)
class TwinResponse:
    """An HTTP response: status, headers and body chunks (one chunk per SSE event when streaming)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[bytes, ...]
    streaming: bool = False
    #: Marks the response as begun: from then on other requests read the cache entries this one wrote.
    begin: Callable[[], None] = attrs.field(default=lambda: None, eq=False, repr=False)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


@attrs.frozen(kw_only=True)
class Exchange:
    """One request the twin answered, for tests: the parsed request and the final response object."""

    method: str
    path: str
    status: int
    request: Any
    response: Any
    streamed: bool


class Twin:
    """Offline emulator of the Anthropic and OpenAI HTTP APIs and their prompt-cache rules.

    policy: plays the model (default: DefaultPolicy: the shop analyst for the demo's tools, else the app's tools).
    clock: seconds, used for cache TTLs and `created` stamps; pass a fake to test expiry.
    rules: (model, vendor) -> CacheRules; default `segue_twin.rules.rules_for`.
    secret: HMAC key for thinking signatures and encrypted reasoning.
    seed: prefix of the deterministic id counters.
    max_body_bytes: request bodies above this get a vendor-shaped 413.
    history: how many recent exchanges `exchanges` keeps.
    best_effort_hits: hit entries of a best-effort retention (OpenAI `24h`, "up to a maximum of 24 hours") until
        that maximum; by default only within the retention the vendor guarantees (see docs/twin.md).
    """

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        clock: Callable[[], float] | None = None,
        rules: RulesSource = rules_for,
        secret: bytes = DEFAULT_SECRET,
        seed: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        history: int = 1000,
        best_effort_hits: bool = False,
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
        self.state = TwinState(
            policy=policy if policy is not None else DefaultPolicy(),
            clock=clock if clock is not None else time.time,
            rules=_serving(_best_effort(rules) if best_effort_hits else rules),
            secret=secret,
            ids=IdFactory(seed),
        )
        self.max_body_bytes = max_body_bytes
        self.exchanges: deque[Exchange] = deque(maxlen=history)
        self._lock = threading.RLock()

    @property
    def policy(self) -> Policy:
        return self.state.policy

    def clear_caches(self) -> None:
        """Forget every prompt-cache entry (both vendors) and every stored OpenAI item."""
        with self._lock:
            self.state.block_cache.clear()
            self.state.prefix_cache.clear()
            self.state.stored_items.clear()

    # -- HTTP -------------------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, *, begun: bool = True
    ) -> TwinResponse:
        """Answer one HTTP request. ``headers`` keys may use any case. Every answer is logged in `exchanges`.

        The cache entries the request writes become readable by other requests when its response begins: at once
        (``begun=True``), or when the caller calls the answer's `begin()`, as the transports and the server do
        just before they deliver it, so that concurrent requests arriving in between write the entries again.
        """
        lowered = {k.lower(): v for k, v in headers.items()}
        route = path.split("?", 1)[0].rstrip("/")
        vendor = self._vendor_for(route, lowered)
        payload: dict[str, Any] | None = None
        ticket = Ticket()
        if begun:
            ticket.begin()
        with self._lock:
            self.state.writer = ticket
            try:
                endpoint = self._check(method, route, lowered, len(body))
                payload = self._json(body)
                reply = self._dispatch(endpoint, payload, lowered)
            except TwinHTTPError as error:
                reply = Reply(status=error.status, body=error.body(vendor))
            except PolicyError as error:  # the test's setup, not an outage: a 400 that says what to do
                reply = Reply(status=400, body=TwinHTTPError(400, f"twin: {error}").body(vendor))
            except Exception as error:  # a bug or odd input must not take the server down; the log has the trace
                _log.exception("twin failed on %s %s", method, route)
                message = f"twin internal error: {type(error).__name__}: {error}"
                reply = Reply(status=500, body=TwinHTTPError(500, message).body(vendor))
            finally:
                self.state.writer = None
            self.exchanges.append(
                Exchange(
                    method=method,
                    path=route,
                    status=reply.status,
                    request=payload,
                    response=reply.body,
                    streamed=reply.streaming,
                )
            )
            return attrs.evolve(self._render(vendor, reply), begin=ticket.begin)

    def oversized(self, path: str, headers: Mapping[str, str], size: int) -> TwinResponse:
        """The 413 for a body of ``size`` bytes, decided before reading it (used by the loopback server)."""
        return self.reject(path, headers, self._too_large(size))

    def reject(self, path: str, headers: Mapping[str, str], error: TwinHTTPError) -> TwinResponse:
        """``error`` rendered in the shape of the vendor that ``path`` (or the headers) belong to."""
        lowered = {k.lower(): v for k, v in headers.items()}
        route = path.split("?", 1)[0].rstrip("/")
        return self._error(self._vendor_for(route, lowered), error)

    def _too_large(self, size: int) -> TwinHTTPError:
        return TwinHTTPError(
            413,
            f"Request body is {size} bytes; the limit is {self.max_body_bytes} bytes. Send a smaller request "
            "(or construct the Twin with a larger max_body_bytes).",
            param=None,
            code="request_too_large",
        )

    @staticmethod
    def _vendor_for(route: str, headers: Mapping[str, str]) -> ErrorVendor:
        if route in _ROUTES:
            return _ROUTES[route][0]
        return "anthropic" if "anthropic-version" in headers or "x-api-key" in headers else "openai"

    def _check(self, method: str, route: str, headers: Mapping[str, str], size: int) -> str:
        if route not in _ROUTES:
            raise TwinHTTPError(
                404,
                f"Unknown path {route!r}. The twin serves POST {', POST '.join(_ROUTES)}.",
                code="unknown_url",
            )
        if method.upper() != "POST":
            raise TwinHTTPError(405, f"Method {method} is not allowed on {route}; use POST.", code="method_not_allowed")
        vendor = _ROUTES[route][0]
        # Recent anthropic clients send the key as a bearer token; older ones (and curl users) use x-api-key.
        key = _bearer(headers.get("authorization")) or (headers.get("x-api-key") if vendor == "anthropic" else None)
        if not key:
            where = "an x-api-key header" if vendor == "anthropic" else "an 'Authorization: Bearer ...' header"
            raise TwinHTTPError(
                401, f"Missing API key: send {where} (any non-empty value works with the twin).", code="invalid_api_key"
            )
        if size > self.max_body_bytes:
            raise self._too_large(size)
        content_type = headers.get("content-type", "")
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise TwinHTTPError(
                400,
                f"Unsupported content type {content_type or '(none)'!r}: send the body as JSON with "
                "'Content-Type: application/json'.",
                code="invalid_content_type",
            )
        return _ROUTES[route][1]

    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TwinHTTPError(
                400,
                f"We could not parse the JSON body of your request ({exc}). The body must be one UTF-8 JSON object.",
                code="invalid_json",
            ) from None
        if not isinstance(payload, dict):
            raise TwinHTTPError(
                400, f"The request body must be a JSON object, got {type(payload).__name__}.", code="invalid_json"
            )
        return payload

    def _dispatch(self, endpoint: str, payload: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        if endpoint == "messages":
            return handle_messages(self.state, payload, headers)
        if endpoint == "responses":
            return handle_responses(self.state, payload)
        if endpoint == "responses_compact":
            return handle_compact(self.state, payload)
        if endpoint == "gemini_chat":
            return handle_chat(self.state, payload, vendor="gemini")
        return handle_chat(self.state, payload)

    def _render(self, vendor: ErrorVendor, reply: Reply) -> TwinResponse:
        request_header = "request-id" if vendor == "anthropic" else "x-request-id"
        request_id = self.state.ids.next("req")
        # An HTTP header is one latin-1 line: the note is kept to ASCII on one line.
        note = " ".join(reply.note.encode("ascii", "replace").decode().split())
        marks = (_MARK, (TWIN_NOTE_HEADER, note)) if note else (_MARK,)
        if reply.streaming:
            return TwinResponse(
                status=reply.status,
                headers=(
                    ("content-type", "text/event-stream; charset=utf-8"),
                    (request_header, request_id),
                    *marks,
                ),
                chunks=reply.events,
                streaming=True,
            )
        body = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        return TwinResponse(
            status=reply.status,
            headers=(("content-type", "application/json"), (request_header, request_id), *marks),
            chunks=(body,),
        )

    @staticmethod
    def _error(vendor: ErrorVendor, error: TwinHTTPError) -> TwinResponse:
        return TwinResponse(
            status=error.status,
            headers=(("content-type", "application/json"), _MARK),
            chunks=(error.body_bytes(vendor),),
        )

    # -- clients ----------------------------------------------------------------------------------------

    def transport(self) -> TwinAsyncTransport:
        """An httpx2 async transport that answers in-process (no sockets)."""
        from segue_twin.transport import TwinAsyncTransport

        return TwinAsyncTransport(self)

    def sync_transport(self) -> TwinSyncTransport:
        """An httpx2 sync transport that answers in-process."""
        from segue_twin.transport import TwinSyncTransport

        return TwinSyncTransport(self)

    def anthropic_client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        """The official AsyncAnthropic client wired to this twin (max_retries=0 unless overridden)."""
        import anthropic
        import httpx2

        options: dict[str, Any] = {"api_key": TWIN_API_KEY, "base_url": TWIN_BASE_URL, "max_retries": 0}
        options.update(kwargs)
        options.setdefault("http_client", httpx2.AsyncClient(transport=self.transport()))
        return anthropic.AsyncAnthropic(**options)

    def openai_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """The official AsyncOpenAI client wired to this twin (max_retries=0 unless overridden)."""
        import httpx2
        import openai

        options: dict[str, Any] = {"api_key": TWIN_API_KEY, "base_url": f"{TWIN_BASE_URL}/v1", "max_retries": 0}
        options.update(kwargs)
        options.setdefault("http_client", httpx2.AsyncClient(transport=self.transport()))
        return openai.AsyncOpenAI(**options)

    def gemini_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """The official AsyncOpenAI client on the twin's Gemini OpenAI-compatible endpoint (`/v1beta/openai`):
        for `OpenAIChatProvider(..., vendor="gemini")`."""
        return self.openai_client(**{"base_url": f"{TWIN_BASE_URL}{GEMINI_BASE_PATH}", **kwargs})


def _best_effort(rules: RulesSource) -> RulesSource:
    """``rules`` with `CacheRules.best_effort_hits` on: best-effort retentions last until their maximum."""

    def lookup(model: str, vendor: str) -> CacheRules:
        return attrs.evolve(rules(model, vendor), best_effort_hits=True)

    return lookup


def _serving(rules: RulesSource) -> RulesSource:
    """``rules``, answering a model it has no rules for the way the vendors answer a model they do not serve."""

    def lookup(model: str, vendor: str) -> CacheRules:
        try:
            return rules(model, vendor)
        except ValueError as error:
            raise model_not_found(model, str(error)) from None

    return lookup


def _bearer(value: str | None) -> str | None:
    if not value or not value.lower().startswith("bearer "):
        return None
    return value[7:].strip() or None
