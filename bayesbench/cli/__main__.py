"""`python -m bayesbench.cli`: the `bayesbench` command."""

import sys

from . import main

sys.exit(main())
