"""The command line's argument types: each refuses a bad value with a message naming it (argparse prints it
with the usage line and exits 2)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 0..65535 (0 = any free port), got {value}")
    return value


def offset(text: str) -> int:
    from segue.store.records import MAX_OFFSET

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_OFFSET:
        raise argparse.ArgumentTypeError(f"expected an offset in 0..{MAX_OFFSET}, got {value}")
    return value


def store_url(text: str) -> str:
    """A run store's URL; a plain path (`./runs.db`, `runs.db`, `/var/lib/segue.db`) is that SQLite file."""
    if "://" in text:
        return text
    if not text.strip():
        raise argparse.ArgumentTypeError("expected sqlite:///path.db, postgresql://... or a path to a SQLite file")
    return f"sqlite:///{text}"


class Parser(argparse.ArgumentParser):
    """argparse's parser, with a "did you mean" for a mistyped option of a command (`--tennant`: `--tenant`).
    Python 3.14's suggest_on_error covers choices only; segue supports 3.11, so the suggestion is made here."""

    def parse_known_args(  # type: ignore[override]  # same signature, narrowed for the one use
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if self._subparsers is None:  # a command's own parser: it knows every option the command takes
            options = [o for o in self._option_string_actions if o.startswith("--")]
            for extra in extras:
                name = extra.split("=", 1)[0]
                near = difflib.get_close_matches(name, options, n=1, cutoff=0.6) if name.startswith("--") else []
                if near:
                    self.error(f"unrecognized argument {name}: did you mean {near[0]}?")
        return parsed, extras
