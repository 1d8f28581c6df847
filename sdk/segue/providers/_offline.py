"""With no API key, a driver talks to segue's twin, and says so once per process.

A fresh install has no key and no network, and the README promises that everything runs there anyway (as
`segue demo` does). So a driver built without `client=` and without its vendor's key variable (nor a base URL
variable pointing somewhere else) gets a client of one shared in-process twin instead of a client that would fail
on its first call. One twin per process means a second run extends the first one's prompt cache, as on the vendor.
A warning names the variable to set, so a deployment that lost its key is not mistaken for a working one.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from segue_twin import Twin

log = logging.getLogger("segue.providers")

_twin: Twin | None = None
_warned: set[str] = set()


def missing_key(*variables: str) -> bool:
    """True when none of the variables (the vendor's key and base-URL variables) is set."""
    return not any(os.environ.get(name) for name in variables)


def offline_twin(driver: str, model: str, key_variable: str, vendor: str) -> Twin:
    """The process's twin, for a driver that found no `key_variable`; warns once per variable."""
    global _twin
    if _twin is None:
        from segue_twin import Twin

        _twin = Twin()
    if key_variable not in _warned:
        _warned.add(key_variable)
        log.warning(
            "segue: %s is not set, so %s(%r) talks to segue's offline twin (an emulator of the %s API, not the "
            "model); set %s or pass client= to reach %s",
            key_variable,
            driver,
            model,
            vendor,
            key_variable,
            vendor,
        )
    return _twin
