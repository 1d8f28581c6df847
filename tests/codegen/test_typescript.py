"""The exported TypeScript declarations compile under `tsc --strict` and type every valid fixture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests._support.environment import NODE_INSTALL, REPO, require_tool


def test_declarations_type_the_valid_fixtures(tmp_path: Path) -> None:
    tsc = require_tool("tsc", "TypeScript compiler for the exported declarations", NODE_INSTALL)
    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "codegen", "--export", str(bundle)], cwd=REPO, check=True)

    lines = ['import type * as segue from "./bundle/typescript/index";', ""]
    count = 0
    for type_dir in sorted((bundle / "fixtures").iterdir()):
        for f in sorted((type_dir / "valid").glob("*.json")):
            count += 1
            lines.append(f"export const f{count}: segue.{type_dir.name} = {f.read_text().strip()};")
    # An invalid value must be rejected too, or the check proves nothing.
    (tmp_path / "fixtures.ts").write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.ts").write_text(
        'import type * as segue from "./bundle/typescript/index";\n'
        'export const bad: segue.TextBlock = { type: "text", text: 5 };\n'
    )
    config = {
        "compilerOptions": {
            "strict": True,
            "noEmit": True,
            "target": "ES2022",
            "module": "ES2022",
            "moduleResolution": "bundler",
            "skipLibCheck": False,
        },
        "files": ["fixtures.ts"],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    ok = subprocess.run([tsc, "-p", str(tmp_path)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert count > 50

    config["files"] = ["bad.ts"]
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    bad = subprocess.run([tsc, "-p", str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode != 0
    assert "bad.ts" in bad.stdout
