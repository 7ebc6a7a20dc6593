"""The matmuls of one tile of the fused linear layer: tokens ``r0:r1`` x vocabulary ``v0:v1``.

With ``logits = hidden @ weight.T + bias`` and ``G`` the gradient of eq. (sp_loss) in one
tile's logits (Lemma 1): the tile's logits are ``hidden[r0:r1] @ weight[v0:v1].T``, and it
adds ``G @ weight[v0:v1]`` to ``grad_hidden[r0:r1]``, ``G^T @ hidden[r0:r1]`` to
``grad_weight[v0:v1]`` and ``G^T 1`` to ``grad_bias[v0:v1]``. Plain matmuls (cuBLAS on
CUDA): static shapes, no host sync, so the CUDA loop can be captured in a graph. Shared by
the fused layer's two tile loops (``_torch_linear``, ``_triton_linear``).
"""

from __future__ import annotations

import torch


def project(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
            out: torch.Tensor) -> torch.Tensor:
    """``out = hidden @ weight.T (+ bias)``: one tile's logits, ``weight``/``bias`` its
    block of the vocabulary."""
    if bias is None:
        return torch.mm(hidden, weight.t(), out=out)
    return torch.addmm(bias, hidden, weight.t(), out=out)


def tile_logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                rows: int, cols: int):
    """The tile loop's walk: for each block of ``rows`` tokens, each block of ``cols``
    vocabulary columns in order, ``(r0, r1, v0, v1, h, w, logits)`` with ``logits = h @ w.T
    (+ bias)`` written into one buffer reused by every tile (consume it before the next)."""
    n, vocab = hidden.shape[0], weight.shape[0]
    rows, cols = min(rows, n), min(cols, vocab)
    buffer = torch.empty(rows * cols, dtype=hidden.dtype, device=hidden.device)
    for r0 in range(0, n, max(rows, 1)):
        r1 = min(n, r0 + rows)
        h = hidden[r0:r1]
        for v0 in range(0, vocab, cols):
            v1 = min(vocab, v0 + cols)
            w, b = weight[v0:v1], None if bias is None else bias[v0:v1]
            yield r0, r1, v0, v1, h, w, project(h, w, b, buffer[:(r1 - r0) * (v1 - v0)]
                                                .view(r1 - r0, v1 - v0))


def _product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, write: bool) -> None:
    """``out = a @ b`` (``write``) or ``out += a @ b``; ``out`` may be wider than the
    operands (an fp32 accumulator of bf16/fp16 products)."""
    if out.dtype != a.dtype:
        product = torch.mm(a, b)
        out.copy_(product) if write else out.add_(product)
    elif write:
        torch.mm(a, b, out=out)
    else:
        out.addmm_(a, b)


def add_tile_grads(g: torch.Tensor, hidden: torch.Tensor, weight: torch.Tensor,
                   grad_h: torch.Tensor | None, grad_w: torch.Tensor | None,
                   grad_b: torch.Tensor | None, first_h: bool = False,
                   first_w: bool = False) -> None:
    """Add one tile's share of the gradients (each skipped where None), for ``g (n, v)`` the
    tile's logit gradient, ``hidden (n, d)`` and ``weight (v, d)`` its blocks; ``first_h``
    (``first_w``): ``grad_h`` (``grad_w``) is written, not added to, being the first tile of
    its rows (the first vocabulary block; the first token block)."""
    if grad_w is not None:
        _product(g.t(), hidden, grad_w, first_w)
    if grad_b is not None:
        grad_b.add_(g.sum(0, dtype=grad_b.dtype))
    if grad_h is not None:
        _product(g, weight, grad_h, first_h)
