"""Which drivers stand behind a provider, the serving paths a request may take through them, and the attributes a
driver may add to Provider (`ProviderExtras`), each read here and nowhere else.

A provider is one driver or a Failover of several (`members`, flattened). A request with a runtime model / vendor
override goes to that vendor's first member; the paths it may be served on are those members' (vendor, model,
the reasoning their wire takes back), the first one tried first. The run pipeline plans the replay once per path.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from segue._core.contracts import Provider, ServingPath
from segue.generated import ModelSettings


class ProviderExtras(Protocol):
    """What a driver may declare beyond Provider; each is optional (a custom provider needs none of them), and the
    reader named beside it says what segue assumes when it is absent.

    - `providers`: a provider made of others (Failover): its members in the order they are tried (`members`;
      absent: the driver alone).
    - `reasoning_vendor`: the ReasoningBlock.vendor whose blocks the driver puts back on the wire, None for none
      (`reasoning_vendor`; absent: its own `vendor`).
    - `check_settings`: raises WireError for ModelSettings the driver's wire cannot send (`settings_checks`;
      absent: it takes any).
    - `prefix_settings`: the ModelSettings fields whose change changes the cached prefix on the driver's wire
      (read by segue.run.config; absent: none).
    - `default_max_tokens`: the max_tokens the driver sends for `model` when the run sets none (read by
      segue.run.window; absent: the driver's `max_tokens` attribute, else unknown).
    """

    providers: Sequence[Provider]
    reasoning_vendor: str | None
    prefix_settings: Collection[str]

    def check_settings(self, settings: ModelSettings) -> None: ...

    def default_max_tokens(self, model: str) -> int: ...


def members(provider: Provider) -> list[Provider]:
    """The drivers behind `provider`, in the order they are tried: itself, or a Failover's members (flattened)."""
    inner: Sequence[Provider] | None = getattr(provider, "providers", None)
    if not inner:
        return [provider]
    return [leaf for p in inner for leaf in members(p)]


def reasoning_vendor(provider: Provider) -> str | None:
    """The ReasoningBlock.vendor a driver replays (its own vendor unless it says otherwise)."""
    value: str | None = getattr(provider, "reasoning_vendor", provider.vendor)
    return value


def settings_checks(provider: Provider) -> tuple[Callable[[ModelSettings], None], ...]:
    """The `check_settings` of every driver behind `provider` that has one, in the order they are tried."""
    return tuple(c for d in members(provider) if (c := getattr(d, "check_settings", None)) is not None)


def first_member(provider: Provider, vendor: str | None = None) -> Provider:
    """The driver a request goes to first: the first member, or with a runtime vendor that vendor's first one."""
    drivers = members(provider)
    return next((d for d in drivers if d.vendor == vendor), drivers[0]) if vendor else drivers[0]


def serving_path(provider: Provider, *, model: str | None = None, vendor: str | None = None) -> ServingPath:
    """The path a request with this model / vendor override goes to first."""
    first = first_member(provider, vendor)
    return ServingPath(vendor=first.vendor, model=model or first.model, reasoning_vendor=reasoning_vendor(first))


def serving_paths(provider: Provider, *, model: str | None = None, vendor: str | None = None) -> list[ServingPath]:
    """Every path a request may be served on, in the order they are tried (the overrides apply to the first)."""
    first = first_member(provider, vendor)
    paths = [serving_path(provider, model=model, vendor=vendor)]
    for d in members(provider):
        path = ServingPath(vendor=d.vendor, model=d.model, reasoning_vendor=reasoning_vendor(d))
        if d is not first and path not in paths:
            paths.append(path)
    return paths
