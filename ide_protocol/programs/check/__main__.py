"""`python3 -m ide_protocol.programs.check` runs the checker as `python3 -m ide_protocol check` does."""
from __future__ import annotations

import sys

from .command import main

sys.exit(main())
