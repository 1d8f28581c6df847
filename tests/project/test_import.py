"""`import segue` stays light: the vendor SDKs load only when a driver is used."""

from __future__ import annotations

import subprocess
import sys


def test_import_segue_does_not_import_vendor_sdks() -> None:
    code = (
        "import sys, segue, segue.generated, segue.providers\n"
        "loaded = sorted(m for m in ('anthropic', 'openai') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
