"""Model settings (ModelSettings) on each wire: which ones a wire takes, and the refusal of the others.

Every wire maps the settings it takes in its own build_request (max_tokens has a different key on each); what it
cannot take is refused here with one error naming the setting, the wire, and what to do, so the run pipeline can
ask before anything is written (segue.run.request) and a wire never drops a setting silently.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal, get_args

import attrs

from segue.errors import WireError
from segue.generated import ModelSettings, get_converter

#: tool_choice values that are not a tool's name (auto, required, none, in that order), spelled alike on the
#: OpenAI wires.
ToolChoiceMode = Literal["auto", "required", "none"]
TOOL_CHOICE_MODES: tuple[ToolChoiceMode, ...] = get_args(ToolChoiceMode)
#: The ModelSettings field whose values the wires check.
EFFORT_SETTING = attrs.fields(ModelSettings).reasoning_effort.name


def refused(**why: str) -> dict[str, str]:
    """ModelSettings field name -> why a wire cannot take it (keyword arguments, so each name is checked against
    the ModelSettings fields)."""
    fields = {f.name for f in attrs.fields(ModelSettings)}
    unknown = set(why) - fields
    if unknown:
        raise ValueError(f"not ModelSettings fields: {sorted(unknown)}")
    return why


def given(settings: ModelSettings | None) -> dict[str, Any]:
    """The settings that are set (not None), by name, as JSON values (an object setting, such as compaction, as
    its dict without unset keys: what fingerprints and the prefix descriptor hash)."""
    if settings is None:
        return {}
    return {
        f.name: get_converter().unstructure(v) if attrs.has(type(v)) else v
        for f in attrs.fields(ModelSettings)
        if (v := getattr(settings, f.name)) is not None
    }


#: Where a refusal points: the table of which setting each wire takes.
SETTINGS_TABLE = "docs/providers.md#model-settings"


def refuse(settings: ModelSettings | None, wire: str, refused: Mapping[str, str]) -> None:
    """WireError for the first setting in `settings` that `refused` (name -> why) names."""
    for name, value in given(settings).items():
        why = refused.get(name)
        if why is not None:
            raise WireError(
                f"model_settings.{name}={value!r} cannot be sent on the {wire} wire: {why}; leave {name} unset for "
                f"this agent (or this run), or serve it from a path that takes it (which wire takes which setting: "
                f"{SETTINGS_TABLE})"
            )


def refuse_values(wire: str, name: str, value: object, allowed: Collection[str]) -> None:
    if value is not None and value not in allowed:
        raise WireError(
            f"model_settings.{name}={value!r} cannot be sent on the {wire} wire, which takes "
            f"{', '.join(sorted(allowed))} (see {SETTINGS_TABLE})"
        )


#: The settings a serving path takes only where its catalog row says so: setting -> the catalog key that says it.
PATH_SETTINGS = {
    attrs.fields(ModelSettings).compaction.name: "llm.vendor_compaction",
    attrs.fields(ModelSettings).context_editing.name: "llm.context_editing",
}


def refuse_off_path(settings: ModelSettings | None, wire: str, path: str, takes: Mapping[str, bool]) -> None:
    """WireError for a vendor-native setting (compaction, context_editing) that `path`'s catalog row does not
    say the vendor documents for it (`takes`: setting -> the row's flag); the wire would send it and the vendor
    refuse it, or an older model ignore it."""
    for name, value in given(settings).items():
        key = PATH_SETTINGS.get(name)
        if key is not None and not takes.get(name, False):
            raise WireError(
                f"model_settings.{name}={value!r} cannot be sent to {path} on the {wire} wire: its catalog row "
                f"does not say {key} (the vendor documents it only for the models its page lists); leave {name} "
                f"unset for this agent (or this run), serve it from a path that has it, or set {key}: true in a "
                f"catalog layer if the vendor has added the model (which path takes which setting: {SETTINGS_TABLE})"
            )
