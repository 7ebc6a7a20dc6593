"""Output transforms and their losses: softmax, sparsemax, alpha-entmax and alpha-ReLU (torch only).

Every transform maps logits ``(..., V)`` to scores; every loss takes raw logits and integer
targets, with ``ignore_index``, ``reduction`` in {none, sum, mean} and ``label_smoothing``,
and has gradient ``p - q`` with respect to the logits (``q`` the smoothed one-hot target).
``linear_alpha_relu_loss`` takes the output projection's input and weight instead and never
materializes the logits. ``*_log_scores``/``log_probs`` give per-step decoding scores (``-inf``
where the output is zero). alpha lies in [1.05, 2] everywhere. alpha-ReLU's threshold ``tau``:
``analytic_tau(V, sigma=... | d_model=...)``, ``tau_for(logits)`` or
``AlphaReLULoss(tau="analytic")``. Engines: ``set_engine``/``engine`` (``ARELU_ENGINE``), the
C++ one compiled ahead with ``build_cpp()``. Bad arguments raise ValueError or TypeError.
"""

from arelu_cli.transforms.alpha_relu import (AlphaReLU, AlphaReLULoss, alpha_relu,
                                             alpha_relu_log_scores, alpha_relu_loss)
from arelu_cli.transforms.engines import ENGINES, build_cpp, engine, get_engine, set_engine
from arelu_cli.transforms.fused_linear import LinearAlphaReLULoss, linear_alpha_relu_loss
from arelu_cli.transforms.normalizing import (cross_entropy_loss, entmax15, entmax15_loss,
                                              entmax_bisect, entmax_bisect_loss, log_probs,
                                              softmax, sparsemax, sparsemax_loss)
from arelu_cli.transforms.tau import (MonteCarloTau, TauEstimate, analytic_tau, empirical_tau,
                                      entmax_threshold, logit_sigma, monte_carlo_tau, tau_for)

__all__ = [
    "AlphaReLU", "AlphaReLULoss", "alpha_relu", "alpha_relu_log_scores", "alpha_relu_loss",
    "LinearAlphaReLULoss", "linear_alpha_relu_loss",
    "cross_entropy_loss", "entmax15", "entmax15_loss", "entmax_bisect", "entmax_bisect_loss",
    "log_probs", "softmax", "sparsemax", "sparsemax_loss",
    "ENGINES", "build_cpp", "engine", "get_engine", "set_engine",
    "MonteCarloTau", "TauEstimate", "analytic_tau", "empirical_tau", "entmax_threshold",
    "logit_sigma", "monte_carlo_tau", "tau_for",
]
