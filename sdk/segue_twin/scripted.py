"""A policy that replays a fixed list of assistant turns, for tests."""

from __future__ import annotations

from collections.abc import Iterable

from segue_twin.view import AssistantTurn, ConversationView, PolicyError


class ScriptedPolicy:
    """Answers request n with turn n. A str is shorthand for a text-only turn.

    `views` records what the model was shown on each answered request, so tests can assert on it. A request after
    the last turn is a `PolicyError`, which the twin answers as a 400 saying how many answers the script had.
    """

    def __init__(self, turns: Iterable[AssistantTurn | str]) -> None:
        self._turns = [AssistantTurn(text=t) if isinstance(t, str) else t for t in turns]
        self._requests = 0
        self.views: list[ConversationView] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - len(self.views)

    def respond(self, view: ConversationView) -> AssistantTurn:
        self._requests += 1
        if not self.remaining:
            given = len(self._turns)
            raise PolicyError(
                f"the ScriptedPolicy has no answer left (it was given {given} answer{'' if given == 1 else 's'} "
                f"and this is request {self._requests}); give it more answers, or check that the client does not "
                "retry"
            )
        self.views.append(view)
        return self._turns[len(self.views) - 1]
