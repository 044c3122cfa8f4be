"""Transactions (Jergler et al.) analysis: the P1-P9 history checks (``checks.py``, listed in
``CHECKS`` and found by the protocol registry; P8, regular traffic, is the pub/sub core's checks,
added to that list)."""
