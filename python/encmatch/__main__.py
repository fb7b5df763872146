"""``python -m encmatch``: the command line (see :mod:`encmatch.cli`)."""

import sys

from .cli import main

sys.exit(main())
