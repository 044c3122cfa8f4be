"""Transactions (Jergler et al.) analysis: the P1-P9 history checks (``checks.py``).

Today's registry finds checks registered with ``@register_check``; the protocol shape
(issue #10) reads ``checks.CHECKS``. Both are served: the list lives in checks.py and is
registered here. P8 (regular traffic) is the pub/sub core's checks, added to the list.
"""

from testbed.analysis.checks import register_check
from testbed.analysis.checks.pubsub import CHECKS as _PUBSUB
from testbed.analysis.transactions import checks as _checks

for _fn in list(_checks.CHECKS) + list(_PUBSUB):
    register_check("transactions")(_fn)
