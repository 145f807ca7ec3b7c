"""Linear-Gaussian state-space models: Kalman filter and smoother, scan, splash, EM fits.

* :mod:`.statespace`: :class:`StateSpace`, one model's matrices (a dict of the blocks
  ``F, H, Q, R, m0, P0``), its checks and constructors;
* :mod:`.linear`: ``family="state_space"``, the model of given matrices whose Kalman
  likelihood ``bulkem.loglik`` / ``kalman_loglik`` evaluate (its data checks and packing);
* :mod:`.kalman`: filter and RTS smoother steps, written once for every engine;
* :mod:`.scan`: elements of the exact time-parallel filter and their combination;
* :mod:`.splash`: the paper's windowed approximation of one predictive density;
* :mod:`.diffuse`: the exact diffuse initialisation of ``kalman_loglik`` (its diffuse phase);
* :mod:`.plan`: the engines' batch of series, how the scan cuts it into chunks;
* :mod:`.em`: EM of AR(p)-plus-noise and local-level models as pieces of the EM driver;
* :mod:`.model`, :mod:`.family`, :mod:`.draws`: those models' data, tables, input forms and
  random starts (``bulkem.fit(..., family="ar" / "local_level")``).
"""

from .statespace import StateSpace

__all__ = ["StateSpace"]
