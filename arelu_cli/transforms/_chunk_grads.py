"""One chunk's share of the fused linear layer's gradients, from the chunk's logit gradient.

With ``G = s (p - q)`` the gradient of eq. (sp_loss) in one chunk's logits (Lemma 1) and
``logits = hidden @ weight.T + bias``: ``grad_hidden = G @ weight`` (the chunk's rows),
``grad_weight += G^T @ hidden``, ``grad_bias += G^T 1``. Plain matmuls (cuBLAS on CUDA):
static shapes, no host sync, so the CUDA loop can be captured in a graph. Shared by the
fused layer's two chunk loops (``fused_linear`` on any device, ``_triton_linear`` on CUDA).
"""

from __future__ import annotations

import torch


def add_chunk_grads(g: torch.Tensor, cols: torch.Tensor | None, hidden: torch.Tensor,
                    weight: torch.Tensor, grad_h: torch.Tensor | None,
                    grad_w: torch.Tensor | None, grad_b: torch.Tensor | None) -> None:
    """Write ``grad_h = g @ weight`` and add ``g^T @ hidden`` to ``grad_w``, ``g^T 1`` to
    ``grad_b`` (each skipped where None), for ``g (n, V)`` the chunk's logit gradient and
    ``hidden (n, d)`` its inputs; ``cols``: the only vocabulary columns of ``g`` that hold a
    nonzero (None: all of them), every other one is skipped."""
    g, w = (g, weight) if cols is None else (g[:, cols], weight[cols])
    if grad_w is not None:
        if cols is None and grad_w.dtype == g.dtype:
            grad_w.addmm_(g.t(), hidden)
        elif cols is None:
            grad_w.add_(torch.mm(g.t(), hidden))
        else:
            grad_w.index_add_(0, cols, torch.mm(g.t(), hidden).to(grad_w.dtype))
    if grad_b is not None:
        if cols is None:
            grad_b.add_(g.sum(0, dtype=grad_b.dtype))
        else:
            grad_b.index_add_(0, cols, g.sum(0, dtype=grad_b.dtype))
    if grad_h is not None:
        torch.mm(g, w, out=grad_h)
