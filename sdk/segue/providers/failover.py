"""Failover: a Provider that tries its members in order when one fails with a retryable error."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

import attrs

from segue.errors import ProviderError
from segue.providers.base import Provider, ProviderRequest, ProviderResponse, StreamDelta, StreamDone, StreamEvent

log = logging.getLogger("segue.providers")


class Failover:
    """Try `providers` in order. A retryable ProviderError (429, 5xx, timeout, dropped connection), raised after
    the member's client has done its own retries, moves on to the next member; anything else (context length,
    bad request, auth) is raised at once, since another vendor would fail the same way or hide a real bug.

    The response names the member that served (`vendor`, `model`) and carries a warning per member skipped.
    `vendor` / `model` here are the primary's; `requires_stable_reasoning_prefix` is true if any member needs it.
    A runtime model override (ProviderRequest.model) goes to the primary only. A stream fails over only before
    its first delta: once text has been shown, switching vendors would repeat or contradict it.
    """

    def __init__(self, providers: Sequence[Provider]) -> None:
        members = list(providers)
        if not members:
            raise ValueError("Failover needs at least one provider, e.g. Failover([primary, secondary])")
        for p in members:
            if not isinstance(p, Provider):
                raise TypeError(f"Failover members must implement segue.providers.Provider, got {type(p).__name__}")
        self.providers = members
        self.vendor = members[0].vendor
        self.model = members[0].model
        self.requires_stable_reasoning_prefix = any(p.requires_stable_reasoning_prefix for p in members)

    def _request(self, i: int, request: ProviderRequest) -> ProviderRequest:
        if i == 0:
            return request
        member = self.providers[i]
        same_vendor = member.vendor == self.vendor
        # The override and the reasoning-drop prediction were made for the primary's model and vendor.
        return attrs.evolve(
            request, model=None, expected_reasoning_drops=request.expected_reasoning_drops if same_vendor else 0
        )

    def _skip(self, i: int, error: ProviderError, skipped: list[str]) -> None:
        member = self.providers[i]
        note = f"{member.vendor}/{member.model} failed ({error.kind}: {error.vendor_message or error}); failed over"
        log.warning(note)
        skipped.append(note)

    def _give_up(self, i: int, error: ProviderError) -> bool:
        return not error.retryable or i == len(self.providers) - 1

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        skipped: list[str] = []
        for i, member in enumerate(self.providers):
            try:
                response = await member.complete(self._request(i, request))
            except ProviderError as e:
                if self._give_up(i, e):
                    raise _final(e, skipped) from e
                self._skip(i, e, skipped)
                continue
            return _noted(response, skipped)
        raise AssertionError("unreachable: the last member either answers or raises")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        skipped: list[str] = []
        for i, member in enumerate(self.providers):
            started = False
            try:
                async for event in member.stream(self._request(i, request)):
                    if isinstance(event, StreamDelta):
                        started = True
                        yield event
                    else:
                        yield StreamDone(response=_noted(event.response, skipped))
                return
            except ProviderError as e:
                if started or self._give_up(i, e):
                    raise _final(e, skipped) from e
                self._skip(i, e, skipped)


def _noted(response: ProviderResponse, skipped: list[str]) -> ProviderResponse:
    return attrs.evolve(response, warnings=[*skipped, *response.warnings]) if skipped else response


def _final(error: ProviderError, skipped: list[str]) -> ProviderError:
    if not skipped:
        return error
    return ProviderError(
        f"{error} (after failing over: {'; '.join(skipped)})",
        vendor=error.vendor,
        kind=error.kind,
        status_code=error.status_code,
        vendor_message=error.vendor_message,
    )
