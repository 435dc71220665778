"""`python -m precision_transpiler` is `ptranspile`."""

import sys

from precision_transpiler.cli import main

sys.exit(main())
