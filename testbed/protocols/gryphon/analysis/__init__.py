"""Gryphon (Bhola et al.) analysis: transforms, per-run figures, and ``reproduce``."""
