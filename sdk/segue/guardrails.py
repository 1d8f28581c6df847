"""Guardrails: the PII guardrail anonymises what reaches the provider and restores it in what comes back.

Emails, phone numbers and card numbers (Luhn-checked) in the user input and in tool results are replaced by
placeholders such as `[EMAIL_1]` before any provider call; placeholders in the answer and in tool arguments are
restored. The mapping lives with the run in the store's private column, which reads never return, and never in
`provider_request`. With a guardrail configured, replayed reasoning is turned off: reasoning produced over the
raw text would not match the anonymised prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

import attrs

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
_PHONE = re.compile(r"(?<![\w+])\+?\d{1,3}?[ .-]?(?:\(\d{2,4}\)|\d{2,4})[ .-]?\d{3,4}[ .-]?\d{3,4}\b")
_PLACEHOLDER = re.compile(r"\[(EMAIL|PHONE|CARD)_(\d+)\]")


def _luhn(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class Guardrail(Protocol):
    """Transforms text on its way to the provider (`protect`) and back to the app (`restore`)."""

    def protect(self, text: str, mapping: dict[str, str]) -> str: ...

    def restore(self, text: str, mapping: dict[str, str]) -> str: ...


@attrs.frozen
class PIIGuardrail:
    """Replace emails, phone numbers and card numbers with placeholders; `mapping` is the run's placeholder table."""

    def protect(self, text: str, mapping: dict[str, str]) -> str:
        reverse = {v: k for k, v in mapping.items()}

        def replacer(kind: str, check: Callable[[str], bool] = lambda _: True) -> Callable[[re.Match[str]], str]:
            def replace(match: re.Match[str]) -> str:
                value = match.group(0)
                if not check(value):
                    return value
                if value not in reverse:
                    count = sum(1 for k in mapping if k.startswith(f"[{kind}_")) + 1
                    placeholder = f"[{kind}_{count}]"
                    mapping[placeholder] = value
                    reverse[value] = placeholder
                return reverse[value]

            return replace

        text = _EMAIL.sub(replacer("EMAIL"), text)
        text = _CARD.sub(replacer("CARD", _luhn), text)
        return _PHONE.sub(replacer("PHONE", lambda v: sum(c.isdigit() for c in v) >= 7), text)

    def restore(self, text: str, mapping: dict[str, str]) -> str:
        return _PLACEHOLDER.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
