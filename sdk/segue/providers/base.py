"""Which drivers stand behind a provider and the serving paths a request may take through them.

A provider is one driver or a Failover of several (`members`, flattened). A request with a runtime model / vendor
override goes to that vendor's first member; the paths it may be served on are those members' (vendor, model,
the reasoning their wire takes back), the first one tried first. The run pipeline plans the replay once per path.
"""

from __future__ import annotations

from collections.abc import Callable

from segue._core.contracts import Provider, ServingPath
from segue.generated import ModelSettings


def members(provider: Provider) -> list[Provider]:
    """The drivers behind `provider`, in the order they are tried: itself, or a Failover's members (flattened)."""
    if not provider.providers:
        return [provider]
    return [leaf for p in provider.providers for leaf in members(p)]


def settings_checks(provider: Provider) -> tuple[Callable[[ModelSettings], None], ...]:
    """The `check_settings` of every driver behind `provider`, in the order they are tried."""
    return tuple(d.check_settings for d in members(provider))


def first_member(provider: Provider, vendor: str | None = None) -> Provider:
    """The driver a request goes to first: the first member, or with a runtime vendor that vendor's first one."""
    drivers = members(provider)
    return next((d for d in drivers if d.vendor == vendor), drivers[0]) if vendor else drivers[0]


def serving_path(provider: Provider, *, model: str | None = None, vendor: str | None = None) -> ServingPath:
    """The path a request with this model / vendor override goes to first."""
    first = first_member(provider, vendor)
    return ServingPath(vendor=first.vendor, model=model or first.model, reasoning_vendor=first.reasoning_vendor)


def serving_paths(provider: Provider, *, model: str | None = None, vendor: str | None = None) -> list[ServingPath]:
    """Every path a request may be served on, in the order they are tried (the overrides apply to the first)."""
    first = first_member(provider, vendor)
    paths = [serving_path(provider, model=model, vendor=vendor)]
    for d in members(provider):
        path = ServingPath(vendor=d.vendor, model=d.model, reasoning_vendor=d.reasoning_vendor)
        if d is not first and path not in paths:
            paths.append(path)
    return paths
