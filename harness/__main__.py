"""`python -m harness ...`: the `harness` command from a checkout, with no console script installed."""

import sys

from harness.cli import main

sys.exit(main())
