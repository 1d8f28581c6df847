"""A run's model settings: checked, merged over the agent's key by key, and asked of every serving path.

Agent(model_settings=...) holds the agent's; run / stream / prewarm(model_settings=...) override them per key.
Both take a ModelSettings or a plain dict of its fields (the protocol's JSON). Each value is checked by ModelSettings
itself (schemas/runs.schema.json: a negative max_tokens, a top_p past 1); here, the settings are shown to each
driver the run may be served by (`check_paths`, once per path: at Agent(...) for the agent's own, at validation
for a run that passes its own), so a setting a path cannot take (seed on Anthropic) is one InputError before
anything is written. A wire's build_request trusts what was asked here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from cattrs.errors import BaseValidationError
from cattrs.v import transform_error

from segue._core.hashing import canonical_hash
from segue.errors import FieldError, InputError, WireError
from segue.generated import ContextEditing, ModelSettings, VendorCompaction, get_converter
from segue.wire.settings import given

SettingsCheck = Callable[[ModelSettings], None]
_SURROGATE = re.compile("[\ud800-\udfff]")
_FIELDS = tuple(f.name for f in attrs.fields(ModelSettings))


def settings_of(value: Any, where: str) -> ModelSettings | None:
    """`value` (a ModelSettings, a dict of its fields, or None) as a ModelSettings, each value checked by
    ModelSettings itself (schemas/runs.schema.json); InputError naming the offending key and value otherwise.
    `where` names the argument in the message."""
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
    stop = fields.get("stop")
    if isinstance(stop, list | tuple):
        fields["stop"] = list(stop)  # a tuple is a list to the app; the class (and JSON) holds a list
        _check_unicode(where, stop)
    return _settings(fields, where)


def _check_unicode(where: str, stop: Sequence[Any]) -> None:
    """Stop sequences are sent as JSON text: a lone surrogate (a JSON `\\ud800` escape without its pair) is none,
    and no vendor API could take it."""
    for i, each in enumerate(stop):
        found = _SURROGATE.search(each) if isinstance(each, str) else None
        if found is not None:
            raise InputError(
                f"{where}: stop[{i}] must be Unicode text, but has a lone surrogate (U+{ord(found.group()):04X}) at "
                f"index {found.start()}, which no vendor API can take; decode the bytes as UTF-8"
            )


#: The settings whose value is an object of its own (a dict of its fields, or the object).
_OBJECTS: dict[str, type] = {"compaction": VendorCompaction, "context_editing": ContextEditing}


def _settings(fields: Mapping[str, Any], where: str) -> ModelSettings:
    """ModelSettings from its fields (FieldError from its validators as InputError naming `where`), an object
    setting given as a dict structured into its type (InputError naming the setting, the value and the converter's
    reason when it does not fit)."""
    built = dict(fields)
    for name, kind in _OBJECTS.items():
        value = built.get(name)
        if value is None or isinstance(value, kind):
            continue
        try:
            built[name] = get_converter().structure(value, kind)
        except Exception as e:  # cattrs' ClassValidationError, the validators' FieldError
            reasons = "; ".join(transform_error(e)) if isinstance(e, BaseValidationError) else str(e)
            raise InputError(
                f"{where}: {name} must be a segue.{kind.__name__} (or a dict of its fields: "
                f"{', '.join(f.name for f in attrs.fields(kind))}), got {value!r:.120} ({reasons})"
            ) from e
    try:
        return ModelSettings(**built)
    except FieldError as e:
        raise InputError(f"{where}: {e.problem}") from None


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
