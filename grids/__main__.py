"""`python -m grids` (see `grids.cli`)."""
import sys

from .cli import main

sys.exit(main())
