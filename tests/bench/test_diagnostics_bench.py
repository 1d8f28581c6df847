"""bench/diagnostics.py drives the issue's ten miss causes (and two more) and prints per cause segue's prediction,
the vendor's verdict and whether they agree, with the agreement rate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "diagnostics.py"
REQUIRED = {
    "tools reordered",
    "system edited",
    "model switched",
    "TTL expired",
    "below the minimum",
    "an earlier message edited",
    "cache key changed",
    "effort changed",
    "thinking toggled",
    "a previous response unknown",
}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_diagnostics", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_the_bench_drives_every_cause_and_prints_the_table() -> None:
    bench = _bench()
    assert REQUIRED <= {c[0] for c in bench.CAUSES}
    picked = [c for c in bench.CAUSES if c[0] in ("tools reordered", "a previous response unknown")]
    rows = await bench.measure(picked)
    assert [(r[0], r[3]) for r in rows] == [("tools reordered", "agree"), ("a previous response unknown", "open")]
    assert rows[0][2].startswith("tools_changed") and rows[1][2] == "the vendor has no record of the previous response"
    table = bench._table(rows)
    assert table.splitlines()[0].split() == ["cause", "segue", "predicts", "vendor", "says", "agreement"]
