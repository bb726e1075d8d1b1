"""``python -m fsdask.cli``: the ``fsdask`` command."""

import sys

from fsdask.cli import main

sys.exit(main())
