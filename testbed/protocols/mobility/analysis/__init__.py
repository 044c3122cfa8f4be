"""Analysis of the mobility protocol (Hu et al.): the history checks P1-P9 (``checks.py``,
listed in ``CHECKS`` and found by the protocol registry)."""
