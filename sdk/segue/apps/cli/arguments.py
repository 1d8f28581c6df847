"""The command line's argument types: each refuses a bad value with a message naming it (argparse prints it
with the usage line and exits 2)."""

from __future__ import annotations

import argparse


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
