"""`segue.twin`: the documented alias of the `segue_twin` package (the offline twin of the vendors' HTTP APIs,
shipped in the same distribution but outside the runtime, which never imports it).

`from segue.twin import Twin` is `from segue_twin import Twin`; the submodules the docs import stay importable by
their old names too: `segue.twin.server` (segue_twin.server), `segue.twin.sample_db` (the demo's shop database,
segue.demo.shop_db) and `segue.twin.testing` (the demo's shop tools and test helpers, segue.demo.sample_tools).
Each alias is the same module object, so classes compare equal whichever name imported them.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import segue_twin
from segue.demo import sample_tools as testing
from segue.demo import shop_db as sample_db
from segue_twin import *  # noqa: F403 (the alias re-exports the twin's public names)
from segue_twin import __all__ as _twin_all
from segue_twin import server

__all__ = [*_twin_all, "sample_db", "server", "testing"]

for _info in pkgutil.iter_modules(segue_twin.__path__):
    sys.modules.setdefault(f"{__name__}.{_info.name}", importlib.import_module(f"segue_twin.{_info.name}"))
sys.modules[f"{__name__}.sample_db"] = sample_db
sys.modules[f"{__name__}.testing"] = testing
