"""`python -m ttlstate inspect|dump|verify <checkpointLocation>` (see `ttlstate.cli`)."""

import sys

from .cli import main

sys.exit(main())
