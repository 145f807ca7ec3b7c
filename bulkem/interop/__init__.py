"""Around the package: the command line (:mod:`.cli`), the R bridge (:mod:`.rbridge`), the
shipped datasets (:mod:`.datasets`); plots are :mod:`bulkem.result.plotting`."""
