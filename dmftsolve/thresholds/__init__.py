"""Thresholds in the sample ratio δ = n/d.

* :mod:`dmftsolve.thresholds.directions` — the easy/hard split of the target directions;
* :mod:`dmftsolve.thresholds.weak_recovery` — the weak-recovery threshold ``δ_alg``;
* :mod:`dmftsolve.thresholds.staged` — ``δ_alg`` of the hard directions once the easy ones are known;
* :mod:`dmftsolve.thresholds.restricted_hessian` — the restricted Hessian's hard outliers at one δ;
* :mod:`dmftsolve.thresholds.hessian_threshold` — the Hessian threshold ``δ_NN(t)`` and its long-time rule;
* :mod:`dmftsolve.thresholds.settings` — the settings of both (``ThresholdSettings``);
* :mod:`dmftsolve.thresholds.delta50` — the probit fit of a success curve and the self-bracketing δ_50 search.

GD's finite-d transition and ``δ_50`` are in :mod:`dmftsolve.finite_d`.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "AlgThreshold": "dmftsolve.thresholds.weak_recovery",
    "alg_threshold": "dmftsolve.thresholds.weak_recovery",
    "StagedThreshold": "dmftsolve.thresholds.staged",
    "staged_alg_threshold": "dmftsolve.thresholds.staged",
    "HardSpectrum": "dmftsolve.thresholds.restricted_hessian",
    "Threshold": "dmftsolve.thresholds.hessian_threshold",
    "ThresholdSettings": "dmftsolve.thresholds.settings",
    "delta_nn": "dmftsolve.thresholds.hessian_threshold",
    "hard_spectrum": "dmftsolve.thresholds.restricted_hessian",
    "hard_spectra": "dmftsolve.thresholds.restricted_hessian",
    "search_threshold": "dmftsolve.thresholds.hessian_threshold",
    "ThresholdPredicate": "dmftsolve.thresholds.hessian_threshold",
    "restricted": "dmftsolve.thresholds.restricted_hessian",
    "DirectionSplit": "dmftsolve.thresholds.directions",
    "probit_fit": "dmftsolve.thresholds.delta50",
    "search_delta_50": "dmftsolve.thresholds.delta50",
    "split_directions": "dmftsolve.thresholds.directions",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
