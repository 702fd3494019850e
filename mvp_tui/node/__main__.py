"""`python3 agent.pyz` (the built zipapp) and `python -m mvp_tui.node`: run the node agent."""

import sys

from mvp_tui.node.main import main

sys.exit(main())
