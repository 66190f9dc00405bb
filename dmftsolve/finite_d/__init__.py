"""GD's finite-d transition predicted by the DMFT (``docs/theory.md`` §7).

* :mod:`dmftsolve.finite_d.settings` — :class:`TransitionSettings` and the kernel-path policy;
* :mod:`dmftsolve.finite_d.directions` — the hard directions that decide success;
* :mod:`dmftsolve.finite_d.force` — GD's finite-``n`` gradient on a draw's overlaps;
* :mod:`dmftsolve.finite_d.stopping` — first passage and giving up;
* :mod:`dmftsolve.finite_d.spectral` — the spectral start and the finite-d law of its overlap;
* :mod:`dmftsolve.finite_d.draws` — one draw: a DMFT solve from a random start's overlap;
* :mod:`dmftsolve.finite_d.curve` — the success probability, the curve and δ_50;
* :mod:`dmftsolve.finite_d.diagnostics` — warnings on settings that bias δ_50;
* :mod:`dmftsolve.finite_d.hard_overlap` — the linearised finite-d law of the hard overlap.

Public names are re-exported here lazily (importing the package stays cheap).
"""

from dmftsolve._lazy import lazy_getattr

_EXPORTS = {
    "TransitionSettings": "dmftsolve.finite_d.settings",
    "default_kernel_paths": "dmftsolve.finite_d.settings",
    "default_paths_per_sample": "dmftsolve.finite_d.settings",
    "recommended_kernel_paths": "dmftsolve.finite_d.settings",
    "resolve_settings": "dmftsolve.finite_d.settings",
    "label_is_uncentred": "dmftsolve.finite_d.settings",
    "label_moments": "dmftsolve.finite_d.settings",
    "kernel_paths": "dmftsolve.finite_d.settings",
    "transition_directions": "dmftsolve.finite_d.directions",
    "curvature_excess": "dmftsolve.finite_d.diagnostics",
    "curvature_warning": "dmftsolve.finite_d.diagnostics",
    "label_mean_warning": "dmftsolve.finite_d.diagnostics",
    "paired_force_weights": "dmftsolve.finite_d.force",
    "give_up_window": "dmftsolve.finite_d.stopping",
    "gives_up": "dmftsolve.finite_d.stopping",
    "stratified_starts": "dmftsolve.finite_d.draws",
    "draw_settings": "dmftsolve.finite_d.draws",
    "run_draw": "dmftsolve.finite_d.draws",
    "sane_steps": "dmftsolve.finite_d.draws",
    "draw_seed": "dmftsolve.finite_d.draws",
    "BootstrapForce": "dmftsolve.finite_d.force",
    "FirstPassage": "dmftsolve.finite_d.stopping",
    "give_up_step": "dmftsolve.finite_d.stopping",
    "optimal_preprocessing": "dmftsolve.finite_d.spectral",
    "spectral_overlaps": "dmftsolve.finite_d.spectral",
    "spectral_threshold": "dmftsolve.finite_d.spectral",
    "draw_starts": "dmftsolve.finite_d.draws",
    "solve_draw": "dmftsolve.finite_d.draws",
    "SuccessProbability": "dmftsolve.finite_d.curve",
    "TransitionCurve": "dmftsolve.finite_d.curve",
    "success_probability": "dmftsolve.finite_d.curve",
    "transition": "dmftsolve.finite_d.curve",
    "adaptive_search": "dmftsolve.finite_d.curve",
    "probit_fit": "dmftsolve.thresholds.delta50",
    "HardOverlapSettings": "dmftsolve.finite_d.hard_overlap",
    "hard_overlap_law": "dmftsolve.finite_d.hard_overlap",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
