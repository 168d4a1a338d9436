"""`python3 -m ide_protocol relay`: Copilot CLI on one machine (container, SSH host, WSL),
the IDE on another, joined by one byte stream.

* `frames`  — the link format (sans-IO): streams, flow control, lock news.
* `pathmap` — the path mapping tables (pure functions).
* `rewrite` — those tables applied to parsed JSON-RPC messages, both ways.
"""
