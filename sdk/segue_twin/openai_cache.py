"""OpenAI prompt caching for both endpoints: the prompt as pieces, `prompt_cache_options`, and the accounting.

The prompt is a list of pieces in the order the model reads it: the settings that break the prefix, the tools,
the instructions, then every content part of every input item (an item without parts is one piece). Two cache
models read it (https://developers.openai.com/api/docs/guides/prompt-caching):

- prefix (models before GPT-5.6): the pieces joined into bytes, matched as exact byte prefixes from the
  minimum in fixed token steps (`PrefixCache`);
- breakpoint (GPT-5.6 and later): the pieces are blocks of a `BlockCache`; a request reads only at breakpoints
  written before and writes at most `max_breakpoints`: in implicit mode the implicit breakpoint, which the guide
  places "at the end of the latest eligible message", plus the latest explicit ones; in explicit mode the latest
  explicit ones, and none at all means no caching (the `PromptCacheOptions` docstring of the pinned openai SDK).

Eligible items are the ones whose parts may carry `prompt_cache_breakpoint`: input messages from the user,
system or developer, and tool outputs. Breakpoints on assistant output are not breakpoints.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

import attrs

from segue._core.image_tokens import ImageFormula
from segue._core.tokens import count_bytes
from segue_twin._wire import ordered_json, strip_for_binding
from segue_twin.cache import CacheBlock, prompt_tokens
from segue_twin.errors import bad_request
from segue_twin.images import image_tokens, is_image, stand_in
from segue_twin.rules import CacheRules
from segue_twin.state import TwinState

#: `prompt_cache_retention` values (deprecated field; the SDK's literal). On breakpoint models it is a maximum
#: retention that "does not interact" with `prompt_cache_options.ttl`, so the twin accepts it and keeps the ttl.
RETENTIONS = ("in_memory", "24h")


@attrs.frozen(kw_only=True)
class CacheOptions:
    """`prompt_cache_options` as applied (breakpoint models only; defaults filled in)."""

    mode: Literal["implicit", "explicit"]
    ttl: str
    prewarm: bool = False
    comparison_response_id: str | None = None

    def applied(self) -> dict[str, Any]:
        """The response's `prompt_cache_options`: "The prompt-caching options that were applied"."""
        return {"mode": self.mode, "ttl": self.ttl, "comparison_response_id": self.comparison_response_id}


def cache_options(
    body: Mapping[str, Any], rules: CacheRules, model: str, *, fields: Collection[str], ttls: Collection[str]
) -> CacheOptions | None:
    """Parse `prompt_cache_options` (``fields``: the keys this endpoint takes; ``ttls``: the TTLs it offers).

    None for a model without a breakpoint cache, which refuses the field ("Supported for `gpt-5.6` and later").
    """
    raw = body.get("prompt_cache_options")
    if rules.style != "breakpoint":
        if raw is not None:
            raise bad_request(
                f"Unsupported parameter: 'prompt_cache_options' is not supported with the model {model!r} (it is "
                "supported for gpt-5.6 and later models); remove it, the model caches prompt prefixes automatically.",
                param="prompt_cache_options",
                code="unsupported_parameter",
            )
        return None
    if raw is None:
        return CacheOptions(mode="implicit", ttl=rules.default_ttl)
    if not isinstance(raw, dict):
        raise bad_request(
            f"Invalid type for 'prompt_cache_options': expected an object, but got {raw!r}.",
            param="prompt_cache_options",
            code="invalid_type",
        )
    for key in raw:
        if key not in fields:
            raise bad_request(
                f"Unknown parameter: 'prompt_cache_options.{key}'. This endpoint takes {sorted(fields)}.",
                param=f"prompt_cache_options.{key}",
                code="unknown_parameter",
            )
    mode = raw.get("mode", "implicit")
    if mode not in ("implicit", "explicit"):
        raise bad_request(
            f"Invalid value for 'prompt_cache_options.mode': {mode!r}; expected 'implicit' or 'explicit'.",
            param="prompt_cache_options.mode",
            code="invalid_value",
        )
    ttl = _ttl(raw.get("ttl", rules.default_ttl), ttls, "prompt_cache_options.ttl")
    prewarm = raw.get("prewarm", False)
    if not isinstance(prewarm, bool):
        raise bad_request(
            f"Invalid type for 'prompt_cache_options.prewarm': expected a boolean, but got {prewarm!r}.",
            param="prompt_cache_options.prewarm",
            code="invalid_type",
        )
    comparison = raw.get("comparison_response_id")
    if comparison is not None and not isinstance(comparison, str):
        raise bad_request(
            f"Invalid type for 'prompt_cache_options.comparison_response_id': expected a string, got {comparison!r}.",
            param="prompt_cache_options.comparison_response_id",
            code="invalid_type",
        )
    return CacheOptions(mode=mode, ttl=ttl, prewarm=prewarm, comparison_response_id=comparison)


def check_retention(retention: str | None, rules: CacheRules) -> None:
    """`prompt_cache_retention`: one of the model's TTLs on a prefix cache; any wire value on a breakpoint cache."""
    offered = RETENTIONS if rules.style == "breakpoint" else tuple(rules.ttl_seconds)
    if retention is not None and retention not in offered:
        raise bad_request(
            f"Invalid value for 'prompt_cache_retention': {retention!r}; expected one of {sorted(offered)}.",
            param="prompt_cache_retention",
            code="invalid_value",
        )


def _ttl(value: Any, ttls: Collection[str], param: str) -> str:
    if value not in ttls:
        raise bad_request(
            f"Invalid value for '{param}': {value!r}; supported values are {sorted(ttls)}.",
            param=param,
            code="invalid_value",
        )
    return str(value)


@attrs.frozen(kw_only=True)
class PromptPiece:
    """One piece of the prompt: what the model reads, and the breakpoint it carries (as sent)."""

    render: Any
    eligible: bool = False
    breakpoint: Any = None
    path: str = ""


def item_pieces(
    head: dict[str, Any],
    content: Any,
    *,
    eligible: bool,
    field: str,
    path: str,
    tail: Mapping[str, Any] | None = None,
    images: ImageFormula | None = None,
    model: str = "",
) -> list[PromptPiece]:
    """Pieces of an item whose ``content`` (a string or a list of parts) sits under ``field`` between ``head``
    and ``tail`` (the item's other fields, in wire order).

    The first piece carries the other fields; a string is one text part, so a message reads the same whether
    its text comes as a string or as one text part. An image part reads as a stand-in of the tokens the model's
    formula (`images`) gives it, where that is known (segue_twin.images).
    """
    parts = content if isinstance(content, list) and content else [content if isinstance(content, str) else ""]
    pieces = []
    for j, part in enumerate(parts):
        seen = part_render(part, images, model)
        render = {**head, field: seen, **(tail or {})} if j == 0 else {field: seen}
        marker = part.get("prompt_cache_breakpoint") if isinstance(part, dict) else None
        where = f"{path}.{field}[{j}]" if isinstance(content, list) else f"{path}.{field}"
        pieces.append(PromptPiece(render=render, eligible=eligible, breakpoint=marker, path=where))
    return pieces


def part_render(part: Any, images: ImageFormula | None = None, model: str = "") -> Any:
    """What the model reads of a content part: its text, an image's stand-in (its formula's tokens), or the part
    itself (a file, an image of unknown cost) without markers."""
    if isinstance(part, dict):
        for key in ("text", "refusal"):
            if isinstance(part.get(key), str):
                return part[key]
        seen = strip_for_binding({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"})
        if is_image(seen) and (tokens := image_tokens(seen, images, model)) is not None:
            return stand_in(seen, tokens)
        return seen
    return part


@attrs.frozen(kw_only=True)
class CacheOutcome:
    """One request's input tokens and what the cache did with them (cached and written are parts of input)."""

    input_tokens: int
    cached_tokens: int
    write_tokens: int = 0
    #: Written tokens per TTL name (breakpoint models only).
    write_by_ttl: dict[str, int] | None = None

    def write_details(self) -> dict[str, int] | None:
        """`cache_write_tokens_details`: ``ttl_<name>_tokens`` per TTL the model offers."""
        if self.write_by_ttl is None:
            return None
        return {f"ttl_{name}_tokens": n for name, n in self.write_by_ttl.items()}


def account(
    state: TwinState,
    *,
    model: str,
    cache_key: str | None,
    retention: str | None,
    options: CacheOptions | None,
    pieces: Sequence[PromptPiece],
    breakpoint_ttls: Collection[str],
) -> CacheOutcome:
    """Run ``pieces`` through the model's cache and store what it writes; the caller renders the usage."""
    rules = state.rules(model, "openai")
    if options is None:
        for piece in pieces:
            if piece.eligible and piece.breakpoint is not None:
                raise bad_request(
                    f"Unsupported parameter: '{piece.path}.prompt_cache_breakpoint' is not supported with the model "
                    f"{model!r} (breakpoints are supported for gpt-5.6 and later models); remove it.",
                    param=f"{piece.path}.prompt_cache_breakpoint",
                    code="unsupported_parameter",
                )
        prompt = b"\n".join(ordered_json(piece.render) for piece in pieces)
        cached = state.prefix_cache.account(
            bucket=(model, cache_key),
            prompt=prompt,
            rules=rules,
            ttl_name=retention,
            now=state.clock(),
            writer=state.writer,
        )
        return CacheOutcome(input_tokens=prompt_tokens(prompt), cached_tokens=cached)
    explicit = {
        i: _breakpoint_ttl(piece, options, breakpoint_ttls)
        for i, piece in enumerate(pieces)
        if piece.eligible and piece.breakpoint is not None
    }
    blocks = _blocks(pieces, options, rules, explicit)
    total = sum(block.tokens for block in blocks)
    if options.mode == "explicit" and not explicit:  # "the request does not use prompt caching"
        return CacheOutcome(input_tokens=total, cached_tokens=0, write_by_ttl=dict.fromkeys(rules.ttl_seconds, 0))
    usage = state.block_cache.account(
        namespace=repr(("openai", model, cache_key)),
        blocks=blocks,
        rules=rules,
        now=state.clock(),
        writer=state.writer,
    )
    return CacheOutcome(
        input_tokens=total,
        cached_tokens=usage.cache_read_input_tokens,
        write_tokens=usage.cache_creation_input_tokens,
        write_by_ttl=usage.cache_creation,
    )


def _blocks(
    pieces: Sequence[PromptPiece], options: CacheOptions, rules: CacheRules, explicit: Mapping[int, str]
) -> list[CacheBlock]:
    """Cache blocks of ``pieces``: the breakpoints this request writes (with their TTLs) and the ones it marks.

    Implicit mode writes the implicit breakpoint (the end of the latest eligible item) and the latest
    `max_breakpoints - 1` explicit ones; explicit mode the latest `max_breakpoints` explicit ones.
    """
    writes: dict[int, str] = {}
    keep = rules.number("max_breakpoints")
    if options.mode == "implicit":
        eligible = [i for i, piece in enumerate(pieces) if piece.eligible]
        if eligible:
            writes[eligible[-1]] = options.ttl
        keep -= 1
    for i in list(explicit)[max(0, len(explicit) - keep) :] if keep > 0 else []:
        writes[i] = explicit[i]  # an explicit breakpoint's own ttl wins where it coincides with the implicit one
    return [
        CacheBlock(
            key=ordered_json(piece.render),
            tokens=count_bytes(len(ordered_json(piece.render)) + 1),
            breakpoint_ttl=writes.get(i),
            breakpoint=i in explicit,
        )
        for i, piece in enumerate(pieces)
    ]


def _breakpoint_ttl(piece: PromptPiece, options: CacheOptions, ttls: Collection[str]) -> str:
    marker = piece.breakpoint
    where = f"{piece.path}.prompt_cache_breakpoint"
    if not isinstance(marker, dict) or marker.get("mode") != "explicit":
        raise bad_request(
            f"Invalid value for '{where}': expected {{'mode': 'explicit', 'ttl'?: ...}}, got {marker!r}.",
            param=where,
            code="invalid_value",
        )
    for key in marker:
        if key not in ("mode", "ttl"):
            raise bad_request(
                f"Unknown parameter: '{where}.{key}'. A breakpoint takes 'mode' and 'ttl'.",
                param=f"{where}.{key}",
                code="unknown_parameter",
            )
    # "When `ttl` is omitted, the breakpoint inherits the request's `prompt_cache_options.ttl`."
    return _ttl(marker.get("ttl", options.ttl), ttls, f"{where}.ttl")
