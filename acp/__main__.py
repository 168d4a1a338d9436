"""Entry point of `python3 -m acp` and of the `acp-client` console script.

`main` is importable (setup.cfg names `acp.__main__:main`); the work is in `cli.py`,
imported on call so that importing this module costs nothing.
"""
from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from .cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
