"""Analysis of the ordering protocol (Baldoni et al.): history checks, metrics, figures, reproduce."""
