"""The ``weights(j)`` a training callback receives: the weights of the epoch it reports.

A callback's ``info["weights"](j)`` returns copies of ``(coef, intercept)`` of the j-th
model of ``info["models"]``. It reads the weights the engine trains in (or, for a
certificate computed one epoch late, a buffer the next certificate reuses), so it is
valid only while the callback runs: afterwards training goes on in those arrays, and a
call would return another epoch's weights as if they were this one's. It raises instead.
The sequential driver and the cluster rounds both call their callback through
:func:`call_back`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["CallbackWeights", "call_back"]


class CallbackWeights:
    """``weights(j)`` for one callback call.

    Parameters
    ----------
    cfg : SolverConfig
        Turns one model's weights into ``(coef, intercept)``.
    W : array
        Every model's weights ``(n_models, d [+ 1], k)``, on the host or the device.
    models : ndarray
        The models the callback reports, in its order.
    n_features : int
    to_host : callable
        ``to_host(W)``: a host copy of ``W``.
    """

    def __init__(self, cfg, W, models: np.ndarray, n_features: int, to_host: Callable):
        self._cfg, self._W, self._models = cfg, W, models
        self._n_features, self._to_host = int(n_features), to_host

    def __call__(self, j: int = 0) -> tuple[np.ndarray, np.ndarray]:
        if self._W is None:
            raise RuntimeError("info['weights'] is valid only while the callback that received it runs "
                               "(training has gone on since): call it there and keep the arrays it returns")
        return self._cfg.coef_intercept(self._to_host(self._W)[self._models[j]], self._n_features)

    def close(self) -> None:
        """The callback has returned: later calls raise."""
        self._W = None


def call_back(callback: Callable, info: dict, cfg, W, models: np.ndarray, n_features: int,
              to_host: Callable) -> bool:
    """Call ``callback(info)`` with ``info["weights"]`` (a :class:`CallbackWeights`, closed
    when the callback returns); whether it asked to stop."""
    weights = CallbackWeights(cfg, W, models, n_features, to_host)
    try:
        return bool(callback({**info, "weights": weights}))
    finally:
        weights.close()
