"""The guardrails around a run: what reaches the model is protected (e.g. emails become `[EMAIL_1]`), what
reaches the app and the tools is restored. The run's placeholder table (`pii`) lives in RunState."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from segue.guardrails import Guardrail


class Guard:
    def __init__(self, guardrails: Sequence[Guardrail]) -> None:
        self.guardrails = tuple(guardrails)

    def __bool__(self) -> bool:
        return bool(self.guardrails)

    def protect(self, text: str, pii: dict[str, str]) -> str:
        for g in self.guardrails:
            text = g.protect(text, pii)
        return text

    def restore(self, text: str, pii: dict[str, str]) -> str:
        for g in reversed(self.guardrails):
            text = g.restore(text, pii)
        return text

    def restore_arguments(self, arguments: dict[str, Any], pii: dict[str, str]) -> dict[str, Any]:
        """Placeholders the guardrail put in front of the model become real values again for the tool."""
        if not self.guardrails or not pii:
            return arguments

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return self.restore(value, pii)
            if isinstance(value, list):
                return [walk(v) for v in value]
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            return value

        restored: dict[str, Any] = walk(arguments)
        return restored

    def deltas(self, pii: dict[str, str]) -> DeltaRestorer:
        return DeltaRestorer(lambda text: self.restore(text, pii), hold=bool(self.guardrails))


class DeltaRestorer:
    """Restores guardrail placeholders (e.g. `[EMAIL_1]`) in streamed text, which may split one across deltas:
    text from an unclosed `[` on is held back until the next delta (or the end) completes it."""

    def __init__(self, restore: Callable[[str], str], *, hold: bool) -> None:
        self._restore = restore
        self._hold = hold  # without guardrails there are no placeholders: pass text straight through
        self._held = ""

    def feed(self, text: str) -> str:
        if not self._hold:
            return text
        text = self._held + text
        cut = text.rfind("[")
        if cut != -1 and "]" not in text[cut:] and len(text) - cut <= 32:
            self._held, text = text[cut:], text[:cut]
        else:
            self._held = ""
        return self._restore(text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._restore(held)
