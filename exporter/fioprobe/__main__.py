"""`python -m fioprobe`: the same as the `fioprobe` command."""

import sys

from fioprobe.cli.main import main

sys.exit(main())
