"""Failover: a Provider that tries its members in order when one fails with a retryable error."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

import attrs

from segue._core.contracts import (
    Provider,
    ProviderNote,
    ProviderRequest,
    ProviderResponse,
    ServingPath,
    StreamDelta,
    StreamDone,
    StreamEvent,
    require_provider,
    without_replayed_reasoning,
)
from segue.errors import ProviderError
from segue.providers.base import members, serving_path

log = logging.getLogger("segue.providers")


class Failover(Provider):
    """Try `providers` in order. A retryable ProviderError (429, 5xx, timeout, dropped connection), raised after
    the member's client has done its own retries, moves on to the next member; anything else (context length,
    bad request, auth) is raised at once, since another vendor would fail the same way or hide a real bug.

    The response names the member that served (`vendor`, `model`) and carries a `failover` note per member
    skipped. `vendor` / `model` are the primary's; `requires_stable_reasoning_prefix` is true if any member needs
    it. A runtime model override goes to the first member tried: the primary, or with a runtime vendor
    (ProviderRequest.vendor) the first member of that vendor, which is then tried first. The request's messages
    are fitted to one path (ProviderRequest.replay_path: which replayed reasoning that path takes back); a member
    on another path sends the messages fitted to its own (`replay_alternatives`, or none of the replayed
    reasoning for a path segue did not plan) and the response names that path (`replay_path`). A stream fails
    over only before its first delta: once text has been shown, switching vendors would repeat or contradict it.
    """

    #: The primary's, as `vendor` and `model` are (each member replays its own: segue.providers.base `members`).
    reasoning_vendor: str | None = None

    def __init__(self, providers: Sequence[Provider]) -> None:
        found = list(providers)
        if not found:
            raise ValueError("Failover needs at least one provider, e.g. Failover([primary, secondary])")
        for p in found:
            require_provider(p, "Failover members")
        self.providers = found
        self.vendor = found[0].vendor
        self.model = found[0].model
        self.reasoning_vendor = found[0].reasoning_vendor
        self.requires_stable_reasoning_prefix = any(p.requires_stable_reasoning_prefix for p in found)

    def _order(self, vendor: str | None) -> list[Provider]:
        """Members in the order they are tried: with a runtime vendor, the members serving it come first."""
        if vendor is None:
            return list(self.providers)
        serving = [p for p in self.providers if any(d.vendor == vendor for d in members(p))]
        return serving + [p for p in self.providers if p not in serving]

    def _request(
        self, first: bool, member: Provider, request: ProviderRequest
    ) -> tuple[ProviderRequest, ServingPath | None]:
        """The request as `member` gets it, and the path its messages were fitted to when not the request's own."""
        if not first:  # the override names the first member's model
            request = attrs.evolve(request, model=None, vendor=None)
        if request.replay_path is None:
            return request, None
        path = serving_path(member, model=request.model, vendor=request.vendor)
        if path == request.replay_path:
            return request, None
        fitted = request.replay_alternatives.get(path)
        messages = fitted if fitted is not None else without_replayed_reasoning(request.messages)
        return attrs.evolve(request, messages=messages, replay_path=path), path

    def _skip(self, member: Provider, error: ProviderError, skipped: list[ProviderNote]) -> None:
        message = f"{member.vendor}/{member.model} failed ({error.kind}: {error.vendor_message or error}); failed over"
        log.warning(message)
        skipped.append(ProviderNote(kind="failover", message=message))

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        skipped: list[ProviderNote] = []
        order = self._order(request.vendor)
        for i, member in enumerate(order):
            sent, path = self._request(i == 0, member, request)
            try:
                response = await member.complete(sent)
            except ProviderError as e:
                if not e.retryable or i == len(order) - 1:
                    raise _final(e, skipped) from e
                self._skip(member, e, skipped)
                continue
            return _noted(response, skipped, path)
        raise AssertionError("unreachable: the last member either answers or raises")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        skipped: list[ProviderNote] = []
        order = self._order(request.vendor)
        for i, member in enumerate(order):
            sent, path = self._request(i == 0, member, request)
            started = False
            try:
                async for event in member.stream(sent):
                    if isinstance(event, StreamDelta):
                        started = True
                        yield event
                    else:
                        yield StreamDone(response=_noted(event.response, skipped, path))
                return
            except ProviderError as e:
                if started or not e.retryable or i == len(order) - 1:
                    raise _final(e, skipped) from e
                self._skip(member, e, skipped)


def _noted(response: ProviderResponse, skipped: list[ProviderNote], path: ServingPath | None) -> ProviderResponse:
    if not skipped and path is None:
        return response
    # A nested Failover may have named a more specific path already.
    return attrs.evolve(response, notes=[*skipped, *response.notes], replay_path=response.replay_path or path)


def _final(error: ProviderError, skipped: list[ProviderNote]) -> ProviderError:
    if not skipped:
        return error
    return ProviderError(
        f"{error} (after failing over: {'; '.join(n.message for n in skipped)})",
        vendor=error.vendor,
        kind=error.kind,
        status_code=error.status_code,
        vendor_message=error.vendor_message,
    )
