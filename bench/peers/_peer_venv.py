"""A side virtual environment for a peer package (e.g. dendrux), so benchmarks can run it beside segue.

Created on first use under ~/.cache/segue-bench/<package>; if the package registry is unreachable the caller
gets None and prints that the comparison was skipped.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

CACHE = Path.home() / ".cache" / "segue-bench"


def peer_python(package: str, version: str, extras: str | None = None, module: str | None = None) -> Path | None:
    """Path of a Python that can import `package==version` (with `extras`), or None when it cannot be installed.

    `module` is the name the package is imported by, when it is not the package's name (pydantic-ai-slim:
    pydantic_ai; openai-agents: agents)."""
    home = CACHE / f"{package}-{version}" if extras is None else CACHE / f"{package}-{extras}-{version}"
    requirement = f"{package}[{extras}]=={version}" if extras else f"{package}=={version}"
    python = home / "bin" / "python"
    probe = [str(python), "-c", f"import {module or package}"]
    if python.exists() and subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return python
    print(f"  (installing {requirement} into {home}, once)", file=sys.stderr, flush=True)
    try:
        venv.create(home, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", requirement],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        print(
            f"  ({package} {version} could not be installed into {home}: {type(e).__name__}; skipped)", file=sys.stderr
        )
        return None
    return python
