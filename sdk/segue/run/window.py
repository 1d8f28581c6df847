"""How much of a run's first request the replayed runs may take: the serving path's context window (catalog
`llm.context_window`) less its output budget (the driver's `default_max_tokens`, where it has one), less what the run
sends of its own (system prompt, stable head, tool definitions, history, the new input).

Every path a request may be served on counts (a Failover's members too): the plan is fitted to the smallest room.
A path whose window the catalog does not give sets no bound. Tokens are segue's approximation (segue._core.tokens),
the one the replay budget and the twin use; an image counts by the path's formula (catalog `llm.image_tokens`,
segue._core.image_tokens), and as its JSON where that is unknown (a URL image, a path without a formula).
"""

from __future__ import annotations

import attrs

from segue._core.contracts import Provider
from segue._core.hashing import message_json
from segue._core.image_tokens import FORMULAS, ImageFormula, block_tokens
from segue._core.tokens import count_json, count_tokens
from segue.catalog import CatalogError
from segue.errors import InputError, WireError
from segue.generated import ImageBlock, Message, get_converter
from segue.providers.base import first_member, members
from segue.run.config import AgentConfig, RunConfig
from segue.run.context import fold_dynamic
from segue.run.conversation import user_message
from segue.run.request import RunRequest


@attrs.frozen(kw_only=True)
class Room:
    """The replayed region's room on the tightest path: `tokens` (what is left after the run's own part)."""

    tokens: int
    path: str
    window: int
    output: int
    #: What a request's messages may take on this path: the window less the output budget, the system prompt,
    #: stable head and tools (every iteration's request is fitted to it: segue.run.fit_iterations).
    messages: int = 0
    #: How this path counts an image (catalog `llm.image_tokens`; None: as its JSON).
    images: ImageFormula | None = None

    def why(self) -> str:
        return f"{self.path}'s context window ({self.window:,} tokens, less {self.output:,} for output)"


def replay_room(agent: AgentConfig, request: RunRequest, config: RunConfig) -> Room | None:
    """The room left for replayed runs, or None when no path's window is known. InputError when the run's own
    part does not fit on some path: nothing could be sent there, so nothing is written."""
    catalog = agent.catalog()
    drivers = members(agent.provider)
    first = first_member(agent.provider, request.params.vendor)
    tightest: Room | None = None
    own_by_formula: dict[ImageFormula | None, int] = {}  # the run's own part, counted once per image formula
    for i, path in enumerate([config.current, *config.alternatives]):
        try:
            resolved = catalog.resolve(path.model, path.vendor)
        except CatalogError:
            continue
        window = resolved.context_window
        if not isinstance(window, int) or window <= 0:
            continue
        named = resolved.get("llm", "image_tokens", default=None)
        formula = next((f for f in FORMULAS if f == named), None)
        if formula not in own_by_formula:
            own_by_formula[formula] = _own_tokens(request, config, formula)
        own = own_by_formula[formula]
        fixed = _fixed_tokens(config)
        same = (d for d in drivers if (d.vendor, d.model) == (path.vendor, path.model))
        driver = first if i == 0 else next(same, None)
        output = _output_budget(driver, request, path.model)
        room = Room(
            tokens=window - output - own,
            path=f"{path.vendor}/{path.model}",
            window=window,
            output=output,
            messages=window - output - fixed,
            images=formula,
        )
        if room.tokens < 0:
            raise InputError(_no_room(room, own, request.settings.max_tokens))
        if tightest is None or room.tokens < tightest.tokens:
            tightest = room
    return tightest


def _no_room(room: Room, own: int, max_tokens: int | None) -> str:
    """Why nothing fits: the output the run asked for alone (max_tokens), or its own input with that output."""
    if max_tokens is not None and max_tokens >= room.window:
        return (
            f"model_settings.max_tokens={max_tokens:,} leaves no room for input on {room.path}, whose context window "
            f"holds {room.window:,} tokens of input and output together; lower max_tokens below {room.window:,} "
            f"less the run's own input (about {own:,} tokens)"
        )
    lower = f", lower model_settings.max_tokens ({max_tokens:,})" if max_tokens is not None else ""
    return (
        f"the run's own input does not fit {room.why()}: its system prompt, tools, history and new input come to "
        f"about {own:,} tokens; shorten the input or history{lower}, or serve it on a model with a larger context "
        "window"
    )


def _output_budget(driver: Provider | None, request: RunRequest, model: str) -> int:
    """The output tokens a request leaves room for: the run's max_tokens setting, else what the driver sends when
    none is set (Anthropic's catalog `llm.default_max_tokens`), else 0: the vendor's own default, unknown here (or
    no driver of the path's own: a path the request may not take)."""
    value: object = request.settings.max_tokens
    if value is None and driver is not None:
        try:
            value = driver.default_max_tokens(model)
        except WireError:
            value = None  # no default known: the request itself is refused later, naming what to set
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _fixed_tokens(config: RunConfig) -> int:
    """What every request of the run sends besides its messages: system prompt, stable head, tool definitions."""
    conv = get_converter()
    system = count_tokens(config.system) + count_tokens(config.stable_head or "")
    return system + sum(count_json(conv.unstructure(d)) for d in config.tools.definitions)


def _own_tokens(request: RunRequest, config: RunConfig, images: ImageFormula | None) -> int:
    messages: list[Message] = [*request.history, user_message(fold_dynamic(request.context, request.params.input))]
    return _fixed_tokens(config) + sum(message_tokens(m, images) for m in messages)


def message_tokens(message: Message, images: ImageFormula | None) -> int:
    """A message's tokens: its JSON, each image whose cost the formula gives counted by it instead (a base64
    image's JSON is its bytes as text, far from what it costs)."""
    known = {
        i: n for i, b in enumerate(message.content) if isinstance(b, ImageBlock) and (n := block_tokens(b, images))
    }
    if not known:
        return count_tokens(message_json(message))
    rest = attrs.evolve(message, content=[b for i, b in enumerate(message.content) if i not in known])
    return count_tokens(message_json(rest)) + sum(known.values())
