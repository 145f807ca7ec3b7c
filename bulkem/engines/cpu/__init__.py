"""The CPU engines, one module per strategy of :mod:`bulkem.engines.select`, and the Kalman filters.

* :mod:`.bulk`: every fit in a ``prange`` loop, one thread per fit;
* :mod:`.wide`: few fits of many units (sequences, runs), each over every core;
* :mod:`.large`: few mixture fits of very many observations, each over every core;
* :mod:`.kalman`: the Kalman likelihoods (:func:`bulkem.kalman_loglik`) and smoother.
"""
