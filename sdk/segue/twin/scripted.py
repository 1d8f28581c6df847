"""A policy that replays a fixed list of assistant turns, for tests."""

from __future__ import annotations

from collections.abc import Iterable

from segue.twin.view import AssistantTurn, ConversationView, PolicyError


class ScriptedPolicy:
    """Answers request n with turn n. A str is shorthand for a text-only turn.

    `views` records what the model was shown on each request, so tests can assert on it.
    """

    def __init__(self, turns: Iterable[AssistantTurn | str]) -> None:
        self._turns = [AssistantTurn(text=t) if isinstance(t, str) else t for t in turns]
        self._next = 0
        self.views: list[ConversationView] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    def respond(self, view: ConversationView) -> AssistantTurn:
        if self._next >= len(self._turns):
            raise PolicyError(
                f"ScriptedPolicy ran out of turns: request {self._next + 1} arrived but only {len(self._turns)} "
                "turns were scripted; add turns or check that the client is not retrying"
            )
        self.views.append(view)
        turn = self._turns[self._next]
        self._next += 1
        return turn
