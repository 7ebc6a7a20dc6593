"""Training with the output projection fused into alpha-ReLU's loss (``[train] fused_output``).

:class:`FusedOutputLoss` wraps the model so that one forward call runs the network up to
the decoder's normed states and then :func:`arelu_cli.transforms.linear_alpha_relu_loss`
on them with the model's output weight and bias: the paper's loss (eq. sp_loss) and its
gradients without the N x V logits. It is one module because DistributedDataParallel,
which wraps it, supports only parameters used inside its forward (with
``find_unused_parameters`` a projection applied after it would be taken for unused). The
model itself still returns logits; the transform lives here, not in it.
"""

from __future__ import annotations

import torch
from torch import nn

from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import OutputTransform
from arelu_cli.transforms import linear_alpha_relu_loss

# Under torch.compile the loss runs eagerly, behind one graph break (its own rule: Dynamo
# cannot trace its data-dependent loops).
_fused_loss = linear_alpha_relu_loss


class FusedOutputLoss(nn.Module):
    """``(*inputs, keep, target) -> (loss, hidden)``, ``inputs`` the model's (``src, tgt_in``,
    or a language model's ``tokens``): the alpha-ReLU loss summed over the
    N positions where ``keep`` (B, T) is True, at ``target`` (N,) smoothed by
    ``label_smoothing`` (``[train] label_smoothing``), and the detached hidden states (N, D)
    it was computed from (for :func:`arelu_cli.model.output_stats.hidden_stats`)."""

    def __init__(self, model: Transformer, transform: OutputTransform,
                 label_smoothing: float = 0.0):
        super().__init__()
        if transform.family != "relu" or transform.tau is None:
            raise ValueError(f"the fused output loss is alpha-ReLU's; got {transform.name!r}")
        self.model = model
        self.alpha, self.tau = transform.alpha, transform.tau
        self.label_smoothing = label_smoothing

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        *inputs, keep, target = args
        hidden = self.model.features(*inputs, keep)  # (N, D)
        output = self.model.output
        # In the weight's dtype (fp32 in training) even where autocast made hidden bf16, so
        # the loss comes back in fp32 as logits.float() gives it unfused; under autocast the
        # matmuls still run in the autocast dtype, the loss math in fp32.
        loss = _fused_loss(hidden.to(output.weight.dtype), output.weight, target, self.alpha,
                           self.tau, bias=output.bias, reduction="sum",
                           label_smoothing=self.label_smoothing)
        return loss, hidden.detach()
