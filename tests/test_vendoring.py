"""Both packages work when their folders are copied into another package (vendoring).

Plugin authors copy `ide_protocol/` (and `acp/` beside it) into their own package; no
module may then import `ide_protocol` or `acp` by their top-level names.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import asyncio, importlib, os, pkgutil, sys
    sys.path.insert(0, sys.argv[1])
    os.environ["COPILOT_HOME"] = sys.argv[2]
    import host.vendor.ide_protocol as ip
    import host.vendor.acp as acp
    names = []
    for pkg in (ip, acp):
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name in ("__main__", "winpipe"):
                continue
            names.append(importlib.import_module(pkg.__name__ + "." + info.name).__name__)
    assert "ide_protocol" not in sys.modules and "acp" not in sys.modules, sorted(
        m for m in sys.modules if m.split(".")[0] in ("ide_protocol", "acp"))
    from host.vendor.acp import _core
    assert _core.jsonrpc.__name__ == "host.vendor.ide_protocol.wire.jsonrpc", _core.jsonrpc.__name__

    async def serve():
        async with ip.IdeServer([sys.argv[1]]) as server:
            return os.path.exists(server.lock_path)

    assert asyncio.run(serve())
    assert os.listdir(os.path.join(sys.argv[2], "ide")) == []
    print("ok", len(names))
""")


def test_vendored_copies_import_and_serve_without_top_level_names(tmp_path) -> None:
    vendor = tmp_path / "host" / "vendor"
    vendor.mkdir(parents=True)
    (tmp_path / "host" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(os.path.join(ROOT, "ide_protocol"), str(vendor / "ide_protocol"), ignore=ignore)
    shutil.copytree(os.path.join(ROOT, "acp"), str(vendor / "acp"), ignore=ignore)
    home = tmp_path / "copilot-home"
    # -I: no PYTHONPATH, no user site, no script directory: only the vendored copies.
    proc = subprocess.run([sys.executable, "-I", "-c", SCRIPT, str(tmp_path), str(home)],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok ")
