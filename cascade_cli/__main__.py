"""`python -m cascade_cli`: the `cascade` command."""

import sys

from cascade_cli.main import main

sys.exit(main())
