import sys

from mvp_tui.cli import main

sys.exit(main())
