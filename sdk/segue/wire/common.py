"""What every vendor wire shares: the request a driver sends, the parsed response, cache anchors and copy-on-write
for breakpoint markers. The typed readers are segue._support.readers' (the generated parsers call them), the two wire
errors segue.errors'.

Nothing here imports a vendor SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

import attrs

from segue._core.contracts import FRAGMENT_META_KEY, ProviderNote, ProviderRequest, StreamDelta
from segue._core.hashing import compact_json
from segue._core.identity import IdentityMemo
from segue.generated import CacheVerdict, Message, ReasoningBlock, Role, Usage

#: segue's roles (the canonical Role enum) by name: the wire code compares them, the mappings translate them.
_ROLE_NAMES: tuple[Role, ...] = get_args(Role)
SYSTEM, USER, ASSISTANT, TOOL = _ROLE_NAMES


@attrs.frozen(kw_only=True)
class Comparison:
    """A request's ask for cache diagnostics: `previous_id` is the vendor's id of the response to compare with
    (None: opt in with nothing to compare yet, where the vendor keeps a fingerprint only for requests that ask)."""

    previous_id: str | None


@attrs.frozen(kw_only=True)
class WireRequest:
    """One vendor request, ready for the official client.

    `body` is the exact JSON the vendor receives. `headers` are only the headers segue sets (never credentials).
    `extra_body` names the top-level keys the SDK's `create()` has no keyword for: drivers pass them through the
    client's `extra_body`. `notes` say what segue left off the wire and why.
    """

    body: dict[str, Any]
    headers: dict[str, str] = attrs.field(factory=dict)
    extra_body: frozenset[str] = frozenset()
    notes: list[ProviderNote] = attrs.field(factory=list)
    #: Wire block path (`messages.i.content.j`) -> index of the canonical message it came from, for reading the
    #: vendor's reports about input blocks; filled only when `binding` (Anthropic only today).
    origins: Mapping[str, int] = attrs.field(factory=dict)
    #: The request asks the vendor to report the replayed reasoning it drops (Anthropic thinking block binding).
    binding: bool = False
    #: The output limit the body sends (None: the vendor's own default applies).
    output_limit: int | None = None
    #: The request asked for cache diagnostics (segue.wire.cache_verdict.Comparison); None: it did not.
    comparison: Comparison | None = None

    def encoded(self) -> bytes:
        """The body as the vendor receives it, encoded the way the official clients encode a JSON body: what the
        drivers post (through a BodyEncoder), and what a stored body re-encodes to."""
        return compact_json(self.body).encode()

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the client's `create()`: typed keys directly, the rest through `extra_body`."""
        kwargs = {k: v for k, v in self.body.items() if k not in self.extra_body}
        extra = {k: self.body[k] for k in self.extra_body if k in self.body}
        if extra:
            kwargs["extra_body"] = extra
        if self.headers:
            kwargs["extra_headers"] = dict(self.headers)
        return kwargs


class BodyEncoder:
    """Encodes request bodies to the bytes `WireRequest.encoded` gives, remembering by identity (IdentityMemo) the
    text of each element of a top-level list (`messages`, `input`, `tools`, `system`). The requests of a run share
    the blocks of their replayed prefix, so each call encodes only what is new to it, not the whole conversation
    again."""

    def __init__(self, size: int = 8_192) -> None:
        self._seen: IdentityMemo[str] = IdentityMemo(size)

    def encode(self, body: Mapping[str, Any]) -> bytes:
        fields = []
        for name, value in body.items():
            text = "[" + ",".join(map(self._element, value)) + "]" if type(value) is list else compact_json(value)
            fields.append(f"{compact_json(name)}:{text}")
        return ("{" + ",".join(fields) + "}").encode()

    def _element(self, item: Any) -> str:
        if type(item) is not dict:
            return compact_json(item)
        text = self._seen.get(item)
        return text if text is not None else self._seen.put(item, compact_json(item))


@attrs.frozen(kw_only=True)
class ParsedResponse:
    """A vendor response turned canonical: the assistant message, usage, normalised stop reason, notes."""

    message: Message
    usage: Usage
    stop_reason: str
    notes: list[ProviderNote] = attrs.field(factory=list)
    input_transformations: list[dict[str, Any]] = attrs.field(factory=list)
    #: The model the response says served it (its `model` field; None: it did not say).
    served_model: str | None = None
    #: Names of tool calls cut off at the output limit (arguments not whole JSON), left out of `message`.
    truncated_calls: tuple[str, ...] = ()
    #: The vendor's cache verdict (segue.wire.cache_verdict), when the request asked for one.
    cache_verdict: CacheVerdict | None = None


def is_fragment(message: Message) -> bool:
    """True for the trailing runtime-state fragment: never a cache anchor."""
    return message.meta is not None and FRAGMENT_META_KEY in message.meta


def cache_anchor(anchors: list[Any], messages: list[Message], end: int | None) -> Any:
    """The wire block for a breakpoint at canonical message `end`: its anchor, or the nearest earlier one.

    `anchors[i]` is the last cacheable wire block canonical message i produced (None if it produced none). The
    trailing runtime-state fragment is skipped: a breakpoint there would be rewritten on every iteration.
    """
    if end is None:
        return None
    for i in range(min(end, len(messages) - 1), -1, -1):
        if anchors[i] is not None and not is_fragment(messages[i]):
            return anchors[i]
    return None


@attrs.frozen(kw_only=True)
class LookbackWindow:
    """A block cache's lookback, for `breakpoint_blocks`: a breakpoint finds an earlier entry only within `blocks`
    content blocks, its own block being the first; at most `limit` breakpoints per request; `distance(earlier,
    later)`: content blocks from one wire block to a later one on this request's wire."""

    blocks: int
    limit: int
    distance: Callable[[Any, Any], int]

    def beyond(self, earlier: Any, later: Any) -> bool:
        """Whether a breakpoint on `later` cannot find an entry ending at `earlier`."""
        return self.distance(earlier, later) >= self.blocks


def previous_request_end(messages: list[Message]) -> int | None:
    """The last message of the request before this one (None: there was none): the message before the last
    assistant answer, since a request's answer and what follows it (tool results, the next user turn) come after
    what that request sent."""
    for i in range(len(messages) - 1, 0, -1):
        if messages[i].role == ASSISTANT:
            return i - 1
    return None


def breakpoint_blocks(
    fixed: list[Any], anchors: list[Any], request: ProviderRequest, window: LookbackWindow | None = None
) -> list[Any]:
    """Where block-cache vendors put cache_control (at most four): the `fixed` system/stable-head blocks, the last
    replayed message, the last message (each falling back to the nearest earlier non-fragment anchor).

    With a lookback `window`, also the end of the previous request when the last message lies beyond the window
    from it (a wide parallel tool fan-out adds a tool_use and a tool_result block per call): that breakpoint finds
    the entry the previous request wrote there, so the request reads the earlier prefix instead of writing it
    all again. Within the window's breakpoint limit it takes the last replayed message's place, whose entry it
    reads anyway when the replayed messages end before it."""
    messages = request.messages
    replayed = cache_anchor(anchors, messages, request.replay_end)
    last = cache_anchor(anchors, messages, len(messages) - 1)
    previous = None
    if window is not None and last is not None:
        previous = cache_anchor(anchors, messages, previous_request_end(messages))
        if previous is None or previous is last or not window.beyond(previous, last):
            previous = None
    marks = list(fixed)
    for anchor in (replayed, previous, last):
        if anchor is not None and not any(anchor is m for m in marks):
            marks.append(anchor)
    if window is not None and previous is not None:
        for spare in (replayed, previous):  # over the limit, the replayed end gives way first, then the previous end
            if len(marks) > window.limit and spare is not None and spare is not last:
                marks = [m for m in marks if m is not spare]
    return marks


def writable(items: list[Any], fixed: list[Any], block: Any) -> Any:
    """The `block` a marker may be set on: a `fixed` block (system, stable head: built for this request) as it is,
    any other through `unshare`."""
    return block if any(block is f for f in fixed) else unshare(items, block)


def unshare(items: list[Any], target: Any) -> Any:
    """Copy on write, before a marker (cache_control, a breakpoint) is set on `target`: the dicts and lists on the
    way from `items` (a request's own list of wire messages or items) to `target` are replaced by shallow copies,
    and the copy of `target` is returned. Blocks built once per run (contracts.WirePrefix) are shared by every
    request of the run, so one request's marker must not reach the next. `items` is searched from the end, where
    the anchors are; a `target` not inside it is returned as it is."""
    path = _path(items, target)
    if path is None:
        return target
    container: Any = items
    for key in path:
        value = container[key]
        container[key] = value = dict(value) if isinstance(value, dict) else list(value)
        container = value
    return container


def _path(node: Any, target: Any) -> list[Any] | None:
    """The keys from `node` to `target` (by identity), searched from the end: the cost is what follows it."""
    for key in reversed(list(node) if isinstance(node, dict) else range(len(node))):
        value = node[key]
        if value is target:
            return [key]
        if isinstance(value, dict | list):
            found = _path(value, target)
            if found is not None:
                return [key, *found]
    return None


def foreign_reasoning(block: object, reasoning_vendor: str | None) -> bool:
    """Reasoning this wire must not carry: another vendor's (never rendered as text), or any when it replays none."""
    return isinstance(block, ReasoningBlock) and (reasoning_vendor is None or block.vendor != reasoning_vendor)


def text_delta(text: str) -> StreamDelta:
    """A stream's piece of answer text (every wire's stream assembler emits these)."""
    return StreamDelta(kind="text", text=text)


def reasoning_delta(text: str) -> StreamDelta:
    """A stream's piece of reasoning text (every wire's stream assembler emits these)."""
    return StreamDelta(kind="reasoning", text=text)
