"""Linear-Gaussian state-space models: Kalman filter and smoother steps, scan elements, splash.

* :mod:`.statespace`: the :class:`StateSpace` model, its checks and constructors;
* :mod:`.kalman`: filter and RTS smoother steps, written once for every engine;
* :mod:`.scan`: elements of the exact time-parallel filter and their combination;
* :mod:`.splash`: the paper's windowed approximation of one predictive density;
* :mod:`.plan`: how a batch of series is cut into chunks for the scan.
"""

from .statespace import StateSpace

__all__ = ["StateSpace"]
