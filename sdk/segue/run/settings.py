"""A run's model settings: checked, merged over the agent's key by key, and asked of every serving path.

Agent(model_settings=...) holds the agent's; run / stream / prewarm(model_settings=...) override them per key.
Both take a ModelSettings or a plain dict of its fields (the protocol's JSON). Every value is checked here and the
merged settings are shown to each driver the run may be served by (`check_settings`), so a setting a path cannot
take (seed on Anthropic) or a bad value (a negative max_tokens) is one InputError before anything is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from cattrs.errors import BaseValidationError
from cattrs.v import transform_error

from segue._core.hashing import canonical_hash
from segue.errors import InputError, WireError
from segue.generated import ContextEditing, ModelSettings, VendorCompaction, get_converter
from segue.wire.settings import TOOL_CHOICE_MODES, given

SettingsCheck = Callable[[ModelSettings], None]
#: The largest whole number JSON carries exactly everywhere (RFC 7493, I-JSON, section 2.2: 2**53 - 1); a
#: setting past it would reach the vendor, the store and a JavaScript client as a different number.
JSON_EXACT = 2**53 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
#: reasoning_effort values some wire takes (each wire refuses the ones it does not).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_FIELDS = tuple(f.name for f in attrs.fields(ModelSettings))


def settings_of(value: Any, where: str) -> ModelSettings | None:
    """`value` (a ModelSettings, a dict of its fields, or None) as a checked ModelSettings; InputError naming the
    offending key and value otherwise. `where` names the argument in the message."""
    if value is None:
        return None
    if isinstance(value, ModelSettings):
        fields = given(value)
    elif isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _FIELDS)
        if unknown:
            raise InputError(
                f"{where}: unknown model setting(s) {', '.join(unknown)}; the settings are {', '.join(_FIELDS)}"
            )
        fields = {str(k): v for k, v in value.items() if v is not None}
    else:
        raise InputError(f"{where} must be a segue.ModelSettings (or a dict of its fields), got {type(value).__name__}")
    for name, v in fields.items():
        problem = _problem(name, v)
        if problem is not None:
            raise InputError(f"{where}: {name} must be {problem}, got {v!r:.80}")
    return _settings(fields, where)


#: The settings whose value is an object of its own (a dict of its fields, or the object).
_OBJECTS: dict[str, type] = {"compaction": VendorCompaction, "context_editing": ContextEditing}


def _settings(fields: Mapping[str, Any], where: str) -> ModelSettings:
    """ModelSettings from checked fields, an object setting given as a dict structured into its type (InputError
    naming the setting, the value and the converter's reason when it does not fit)."""
    built = dict(fields)
    for name, kind in _OBJECTS.items():
        value = built.get(name)
        if value is None or isinstance(value, kind):
            continue
        try:
            built[name] = get_converter().structure(value, kind)
        except Exception as e:  # cattrs' ClassValidationError, the validators' ValueError / TypeError
            reasons = "; ".join(transform_error(e)) if isinstance(e, BaseValidationError) else str(e)
            raise InputError(
                f"{where}: {name} must be a segue.{kind.__name__} (or a dict of its fields: "
                f"{', '.join(f.name for f in attrs.fields(kind))}), got {value!r:.120} ({reasons})"
            ) from e
    return ModelSettings(**built)


def _problem(name: str, v: Any) -> str | None:
    """What `v` must be for setting `name`, or None when it is fine. Numbers are finite (JSON has no inf or NaN,
    so neither a body nor the store could carry one) and whole numbers within JSON's exact range."""
    whole = isinstance(v, int) and not isinstance(v, bool) and abs(v) <= JSON_EXACT
    number = whole or (isinstance(v, float) and math.isfinite(v))
    if name == "max_tokens":
        return (
            None
            if whole and v >= 1
            else f"a whole number from 1 to {JSON_EXACT:,} (the most tokens one response may generate)"
        )
    if name == "temperature":
        return None if number and v >= 0 else "a finite number >= 0"
    if name == "top_p":
        return None if number and 0 <= v <= 1 else "a number from 0 to 1"
    if name == "stop":
        ok = isinstance(v, list | tuple) and all(isinstance(s, str) and s and not _SURROGATE.search(s) for s in v)
        return (
            None
            if ok
            else "a list of non-empty strings of Unicode text (a lone surrogate, a JSON \\ud800 escape without its "
            "pair, is none: no vendor API can take it)"
        )
    if name == "seed":
        return None if whole else f"a whole number from {-JSON_EXACT:,} to {JSON_EXACT:,}"
    if name == "tool_choice":
        return None if isinstance(v, str) and v else f"one of {', '.join(TOOL_CHOICE_MODES)} or a tool's name"
    if name == "parallel_tool_calls":
        return None if isinstance(v, bool) else "True or False"
    if name == "reasoning_effort":
        return None if v in EFFORTS else f"one of {', '.join(EFFORTS)}"
    return None


def merged(agent: ModelSettings | None, run: ModelSettings | None) -> ModelSettings | None:
    """The run's settings over the agent's, key by key (None: neither sets anything)."""
    fields = {**given(agent), **given(run)}
    if "stop" in fields:
        fields["stop"] = list(fields["stop"])
    return _settings(fields, "model_settings") if fields else None


def check_paths(settings: ModelSettings | None, checks: Sequence[SettingsCheck]) -> None:
    """Ask every driver the run may be served by (a Failover's members too) whether it takes `settings`."""
    if settings is None:
        return
    for check in checks:
        try:
            check(settings)
        except WireError as e:
            raise InputError(str(e)) from None


def check_tool_choice(settings: ModelSettings | None, tools: Sequence[str]) -> None:
    """tool_choice names a mode or one of the run's tools (known once the run's tool sources were read)."""
    choice = settings.tool_choice if settings is not None else None
    if choice is None or choice in ("auto", "none"):
        return
    if not tools:
        raise InputError(
            f"model_settings.tool_choice={choice!r} needs tools, and this run offers none; leave tool_choice unset"
        )
    if choice != "required" and choice not in tools:
        raise InputError(
            f"model_settings.tool_choice={choice!r} is neither auto, required, none nor one of this run's tools "
            f"({', '.join(sorted(tools))})"
        )


def settings_hash(settings: ModelSettings | None, in_prefix: Sequence[str]) -> str | None:
    """The hash of the settings that are part of a path's cached prefix (the driver's `prefix_settings`), or None
    when none of them is set: a change between runs of a conversation is a prefix change (cause settings)."""
    chosen = {k: v for k, v in given(settings).items() if k in in_prefix}
    return canonical_hash(chosen) if chosen else None
