"""Build the library as one file to copy: `python3 tools/build_pyz.py [OUT]` (`make pyz`).

The zipapp holds `ide_protocol/` (stdlib only) and a `__main__` that runs its command
line, so a container or server with just Python 3.8+ runs
`python3 copilot-ide.pyz relay ide-side --stdio ...` without installing anything.
Byte-compiled caches are left out; the archive is deflated.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipapp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = "import sys\nfrom ide_protocol.__main__ import main\nsys.exit(main())\n"


def build(out: str) -> str:
    with tempfile.TemporaryDirectory() as staging:
        shutil.copytree(os.path.join(ROOT, "ide_protocol"), os.path.join(staging, "ide_protocol"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        with open(os.path.join(staging, "__main__.py"), "w") as f:
            f.write(MAIN)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        zipapp.create_archive(staging, out, interpreter="/usr/bin/env python3", compressed=True)
    return out


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "copilot-ide.pyz")))
