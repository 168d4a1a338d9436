"""A stand-in for the library: only its `bridge` command, scripted (see __main__.py)."""
