"""Analysis of ``echo``, the runtime's test protocol: history checks (``checks.py``)."""
