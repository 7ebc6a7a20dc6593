"""Output transforms and their losses: softmax, sparsemax, alpha-entmax and alpha-ReLU.

Every transform maps logits ``(..., V)`` to scores; every loss takes raw logits and
integer targets, with ``ignore_index`` and ``reduction`` in {none, sum, mean}, and has
gradient ``p - e_y`` with respect to the logits. ``linear_alpha_relu_loss`` takes the
output projection's input and weight instead and never materializes the logits. ``*_log_scores``/``log_probs`` give the
per-step decoding scores (``-inf`` where the output is zero).
"""

from arelu_cli.transforms.alpha_relu import (AlphaReLU, AlphaReLULoss, alpha_relu,
                                             alpha_relu_log_scores, alpha_relu_loss)
from arelu_cli.transforms.fused_linear import LinearAlphaReLULoss, linear_alpha_relu_loss
from arelu_cli.transforms.normalizing import (cross_entropy_loss, entmax15, entmax15_loss,
                                              entmax_bisect, entmax_bisect_loss, log_probs,
                                              softmax, sparsemax, sparsemax_loss)

__all__ = [
    "AlphaReLU", "AlphaReLULoss", "alpha_relu", "alpha_relu_log_scores", "alpha_relu_loss",
    "LinearAlphaReLULoss", "linear_alpha_relu_loss",
    "cross_entropy_loss", "entmax15", "entmax15_loss", "entmax_bisect", "entmax_bisect_loss",
    "log_probs", "softmax", "sparsemax", "sparsemax_loss",
]
