"""`python -m gitm_tui` = the `gitm-tui` command."""

import sys

from gitm_tui.cli import main

sys.exit(main())
