"""`python3 -m ide_protocol relay`: Copilot CLI on one machine (container, SSH host, WSL),
the IDE on another, joined by one byte stream.

* `frames`  — the link format (sans-IO): streams, flow control, lock news.
* `pathmap` — the path mapping tables (pure functions).
* `rewrite` — those tables applied to parsed JSON-RPC messages, both ways.
* `link`    — the link on asyncio: streams with credit, lock news, one owner task.
* `http_relay` — one relayed HTTP connection: the CLI's half checks the relay's nonce and
  rewrites, the IDE's half adds the IDE's nonce.
* `halves`  — the two programs: private socket and lock on the CLI's side, the IDE's
  lock chosen and watched on the IDE's side (`programs/relay.py` parses their options).

docs/RELAY.md tells how to use it and its security model.
"""
