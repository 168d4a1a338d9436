"""Copilot CLI's `/ide` protocol inside Vim (`:py3`), on `ThreadedIdeServer`.

`plugin.py` is the plugin (Vim's side: commands, autocommands, the diff tab),
`positions.py` turns Vim's byte columns into the wire's UTF-16 characters, `loader.py`
finds the `ide_protocol` library. The Vim script in ../../plugin and ../../autoload only
forwards to these.
"""
from __future__ import annotations
