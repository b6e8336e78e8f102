"""``python -m ollie_tray``."""

import sys

from ollie_tray.main import main

sys.exit(main())
