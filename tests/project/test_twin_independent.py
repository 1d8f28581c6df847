"""The twin is an independent oracle (issue 15, item 7): it emulates the vendors from their documented rules, the
catalog and the token counter, and never runs the drivers' wire code, so a driver bug cannot pass as vendor
behaviour. Checked twice: statically over everything the twin's files reach (imports inside functions and under
TYPE_CHECKING included), and at run time in a fresh interpreter where importing the drivers' code fails."""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support.layers import PACKAGE, TWIN_FORBIDDEN, graph


def test_nothing_the_twin_reaches_through_its_imports_is_the_drivers_wire_code() -> None:
    deps = graph()
    start = [m for m in deps if m == "segue_twin" or m.startswith("segue_twin.")]
    assert len(start) > 10, "the twin's modules were not found"
    reached: dict[str, str] = {}  # module -> the twin module whose imports reach it
    stack = [(m, m) for m in start]
    while stack:
        module, origin = stack.pop()
        for d in deps.get(module, ()):
            if d not in reached:
                reached[d] = origin
                stack.append((d, origin))
    assert "segue.catalog" in reached and "segue._core.tokens" in reached, "the walk missed what the twin does use"
    assert sorted(f"{origin} reaches {m}" for m, origin in reached.items() if m.startswith(TWIN_FORBIDDEN)) == []


#: Runs in a fresh interpreter: the `segue` package is entered without its __init__ (which loads the whole SDK for
#: users), the drivers' wire modules are blocked (importing one raises ImportError), every twin module is imported
#: and the twin answers one request of each wire it emulates, so imports inside the functions it runs count too.
PROBE = """
import importlib, json, pkgutil, sys, types
package = types.ModuleType("segue")
package.__path__ = [{package!r}]
sys.modules["segue"] = package
for name in {forbidden!r}:
    sys.modules[name] = None
import segue_twin
for info in pkgutil.walk_packages(segue_twin.__path__, "segue_twin."):
    importlib.import_module(info.name)
from segue_twin import ScriptedPolicy, Twin
twin = Twin(policy=ScriptedPolicy(["ok"] * 10))
user = {{"role": "user", "content": "hi"}}
requests = [
    ("/v1/messages", {{"anthropic-version": "2023-06-01", "x-api-key": "k"}},
     {{"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [user]}}),
    ("/v1/responses", {{"authorization": "Bearer k"}}, {{"model": "gpt-5.4", "input": "hi"}}),
    ("/v1/chat/completions", {{"authorization": "Bearer k"}}, {{"model": "gpt-4.1-mini", "messages": [user]}}),
]
statuses = []
for path, headers, body in requests:
    answer = twin.handle("POST", path, {{"content-type": "application/json", **headers}}, json.dumps(body).encode())
    statuses.append(answer.status)
loaded = sorted(m for m, module in sys.modules.items() if module is not None and m.startswith("segue"))
print(json.dumps({{"statuses": statuses, "loaded": loaded}}))
"""


def test_the_twin_runs_with_the_drivers_wire_code_blocked() -> None:
    code = PROBE.format(package=str(PACKAGE), forbidden=list(TWIN_FORBIDDEN))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["statuses"] == [200, 200, 200]
    loaded = report["loaded"]
    assert "segue_twin.anthropic_api" in loaded and "segue._core.tokens" in loaded
    assert [m for m in loaded if m.startswith(TWIN_FORBIDDEN)] == []
