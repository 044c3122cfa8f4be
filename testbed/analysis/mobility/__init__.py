"""Analysis of the mobility protocol (Hu et al.): the history checks P1-P9 (``checks.py``).

The checks are listed in ``checks.CHECKS`` (the protocol-shape convention) and registered
here for ``mobility`` so ``testbed analyze`` runs them today.
"""

from testbed.analysis.checks import register_check
from testbed.analysis.mobility.checks import CHECKS

for _c in CHECKS:
    register_check("mobility")(_c)
