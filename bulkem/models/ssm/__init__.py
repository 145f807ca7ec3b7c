"""Linear-Gaussian state-space models: Kalman filter and smoother, scan, splash, EM fits.

* :mod:`.statespace`: the :class:`StateSpace` model, its checks and constructors;
* :mod:`.kalman`: filter and RTS smoother steps, written once for every engine;
* :mod:`.scan`: elements of the exact time-parallel filter and their combination;
* :mod:`.splash`: the paper's windowed approximation of one predictive density;
* :mod:`.plan`: how a batch of series is cut into chunks for the scan;
* :mod:`.em`: EM of AR(p)-plus-noise and local-level models as pieces of the EM driver;
* :mod:`.model`, :mod:`.family`, :mod:`.draws`: those models' data, tables, input forms and
  random starts (``bulkem.fit(..., family="ar" / "local_level")``).
"""

from .statespace import StateSpace

__all__ = ["StateSpace"]
