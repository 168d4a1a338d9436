"""`python3 -m ide_protocol doctor [FOLDER] [--json]`: why Copilot CLI does or does not
see an IDE, for any IDE's lock files (VS Code's, JetBrains', ours).

* `rules` — doctor's own knowledge (where the CLI looks, folder relations, settings, trust);
  the CLI's checks of each lock live in `common.lock_rules` (PROTOCOL.md §1);
* `probe` — the CLI's handshake against a usable lock's server, timed (§3);
* `diagnose` — the checks in the CLI's order, findings with stable codes and fixes;
* `cli` — the command line: text for a terminal or JSON, and the exit status.

Doctor only reads: it never changes, renames or deletes a lock file.
"""
from __future__ import annotations

from .cli import main

__all__ = ["main"]
