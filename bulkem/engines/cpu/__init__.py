"""The CPU engines: bulk (a fit per thread) and the Kalman filters; the wide and large regimes
live beside the strategy table (``engines/wide.py``, ``engines/large.py``)."""
