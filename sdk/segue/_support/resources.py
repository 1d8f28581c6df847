"""Where the packaged data lives: inside the wheel (segue/_catalogs, segue/_schemas) or, in a source checkout,
next to sdk/ (catalogs/, schemas/)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # segue/, this file is segue/_support/resources.py
_WHEEL_NAMES = {"catalogs": "_catalogs", "schemas": "_schemas"}


def data_dir(name: str) -> Path:
    """`catalogs` or `schemas`, wherever this installation keeps it."""
    installed = _PACKAGE / _WHEEL_NAMES[name]
    if installed.is_dir():
        return installed
    checkout = _PACKAGE.parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"segue's {name} folder is missing: looked in {installed} and {checkout}; reinstall segue")


def package_version() -> str:
    """The installed segue's version (what `segue --version` and the protocol's initialize report)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("segue")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "(not installed)"
