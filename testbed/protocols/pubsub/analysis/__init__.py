"""Analysis of the content-based pub/sub core (PADRES model): history checks (``checks.py``)."""
