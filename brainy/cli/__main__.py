"""``python -m brainy.cli``: the ``brainy`` command."""

import sys

from brainy.cli import main

sys.exit(main())
