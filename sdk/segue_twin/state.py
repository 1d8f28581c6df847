"""What every twin endpoint shares: the policy, the clock, the cache rules, the caches, ids and secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from segue_twin._wire import IdFactory
from segue_twin.cache import BlockCache, PrefixCache, Ticket
from segue_twin.diagnostics import Fingerprints
from segue_twin.rules import CacheRules
from segue_twin.view import Policy

RulesSource = Callable[[str, str], CacheRules]
"""(model, vendor) -> CacheRules. `segue_twin.rules.rules_for` is the default; a catalog can supply another."""


@attrs.define(kw_only=True)
class TwinState:
    policy: Policy
    clock: Callable[[], float]
    rules: RulesSource
    secret: bytes
    ids: IdFactory
    block_cache: BlockCache = attrs.field(factory=BlockCache)
    prefix_cache: PrefixCache = attrs.field(factory=PrefixCache)
    #: OpenAI items persisted under store=true, by id (so they can be replayed without encrypted_content).
    stored_items: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    #: Cache-diagnostics fingerprints per vendor, by response id (segue_twin.diagnostics).
    fingerprints: dict[str, Fingerprints] = attrs.field(
        factory=lambda: {"anthropic": Fingerprints(), "openai": Fingerprints()}
    )
    #: The ticket of the request being answered: the cache entries it writes are readable once it begins.
    writer: Ticket | None = None


@attrs.frozen(kw_only=True)
class Reply:
    """An endpoint's answer: the final JSON object, plus its SSE events when the request asked to stream."""

    status: int = 200
    body: Any = None
    events: tuple[bytes, ...] = ()
    #: The policy's AssistantTurn.note, sent in TWIN_NOTE_HEADER.
    note: str = ""

    @property
    def streaming(self) -> bool:
        return bool(self.events)
