"""`python -m bayesbench`: the `bayesbench` command (the same as `python -m bayesbench.cli`)."""

import sys

from bayesbench.cli import main

sys.exit(main())
