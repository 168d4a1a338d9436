"""Copilot CLI's `/ide` protocol inside Vim (`:py3`), on `ThreadedIdeServer`.

`boot.py` starts it off Vim's thread, `plugin.py` is the plugin (Vim's side: commands,
autocommands, the diff tab),
`positions.py` turns Vim's byte columns into the wire's UTF-16 characters, `loader.py`
finds the `ide_protocol` library. The Vim script in ../../plugin and ../../autoload only
forwards to these.

Imported on Vim's thread at start-up (before boot.py), so it imports nothing at all.
"""
