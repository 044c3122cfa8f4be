"""``python -m testbed.nodes CONFIG.json``: run one node process."""

import sys

from testbed.nodes.runtime.node_main import main

sys.exit(main())
