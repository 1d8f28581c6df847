"""What an Anthropic Messages request body tells segue.cache.misses: where its cache breakpoints sit, counted the
way Anthropic's lookback counts them. (It routes by no key: `lacks_routing_key` is always False.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from segue._core.identity import IdentityMemo
from segue.generated import ExplainSection
from segue.generated.wire import anthropic as g

__all__ = ["breakpoint_positions", "lacks_routing_key"]

#: Anthropic's lookback counts content blocks: "The system only checks up to 20 blocks before each explicit
#: `cache_control` breakpoint" (prompt caching page), each tool_use and each tool_result being one block. The
#: wire has one marker key (unpacking fails loudly if the mapping ever names another).
(_MARKER,) = g.BREAKPOINT_KEYS
#: The body's key that holds the conversation: the last key the vendor reads in the messages section.
_CONVERSATION = next(k for k, section in reversed(g.REQUEST_PROMPT) if section == get_args(ExplainSection)[-1])
#: The key under which this wire's generated `message` builder puts a message's content blocks.
_PROBE: list[Any] = []
_CONTENT = next(k for k, v in g.message(role="", content=_PROBE).items() if v is _PROBE)


def breakpoint_positions(body: Mapping[str, Any]) -> list[int]:
    """The lookback position of each message content block that carries a cache breakpoint, counting every block
    of the messages from the first."""
    found = _LAST_BODY.get(body)  # this request's body is the next request's `previous`
    return found if found is not None else _LAST_BODY.put(body, _count_positions(body))


def lacks_routing_key(body: Mapping[str, Any]) -> bool:
    return False


#: The last body counted -> its breakpoint_positions.
_LAST_BODY: IdentityMemo[list[int]] = IdentityMemo(1)


def _count_positions(body: Mapping[str, Any]) -> list[int]:
    count = 0
    marks: list[int] = []
    messages = body.get(_CONVERSATION)
    for message in messages if isinstance(messages, list) else ():
        n, own = _message_positions(message)
        marks.extend(count + p for p in own)
        count += n
    return marks


#: A wire message -> its _message_positions. The requests of a run share the wire messages of its replayed prefix
#: (a marker is set on a copy), so each is counted once per run, not once per request twice.
_SEEN: IdentityMemo[tuple[int, list[int]]] = IdentityMemo(16_384)


def _message_positions(message: Any) -> tuple[int, list[int]]:
    """One message's (content blocks, the positions of its marked blocks counted as if it opened the body)."""
    found = _SEEN.get(message)
    if found is not None:
        return found
    content = message.get(_CONTENT) if isinstance(message, dict) else None
    blocks: Sequence[Any] = content if isinstance(content, list) else [content]
    marks = [i for i, block in enumerate(blocks, start=1) if isinstance(block, dict) and block.get(_MARKER)]
    return _SEEN.put(message, (len(blocks), marks))
