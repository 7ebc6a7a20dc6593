"""The ``triton`` engine: GPU kernels for alpha-ReLU and the two passes of its loss.

The paper's Section 2: alpha-ReLU is elementwise (``p = ka * [z - c]_+^e`` with
``c = tau / (alpha - 1)``, ``e = 1 / (alpha - 1)``, ``ka = (alpha - 1)^e``), its loss
(eq. (sp_loss)) needs one per-row sum ``sum_j [z_j - c]_+^(e + 1)`` and its gradient is
``p - e_y`` (Lemma 1). So there are two kernels, both memory-bound, fp32 math on
fp32/bf16/fp16 logits:

* ``_loss_sums_kernel``: one program per row, reads the row once, writes one float.
* ``_probs_kernel``: one program per (row, vocabulary block), reads z and writes
  ``scale_row * ka * [z - c]_+^e`` (the forward transform with no scale, the gradient's
  ``scale * p`` with one); ``out`` may be ``z`` itself (each element is read, then written,
  by one program).

Integer ``e`` in 1..4 (alpha = 2, 1.5, 4/3, 1.25) are exact products; other ``e`` go through
``exp2(e * log2 t)`` where ``t > 0``. NaN logits stay NaN. This module imports
triton, so it is imported only when a kernel is needed; under ``TRITON_INTERPRET=1`` (set
before the import) the kernels run on CPU tensors, which is how the test suite runs them.
The kernels call only ``triton.language`` builtins and this module's own jit functions (no
``tl.sum``/``tl.zeros``, which live in triton's jit-compiled standard library): the tests
re-import this module under the interpreter in a process where triton is already loaded.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_SUM_BLOCK = 4096
_PROBS_BLOCK = 2048


@triton.jit
def _power(t, e, K: tl.constexpr):
    """``t ** K`` for a constant integer K in 1..5, else ``t ** e``; ``t >= 0`` or NaN."""
    if K == 1:
        r = t
    elif K == 2:
        r = t * t
    elif K == 3:
        r = t * t * t
    elif K == 4:
        r = (t * t) * (t * t)
    elif K == 5:
        r = (t * t) * (t * t) * t
    else:
        positive = t > 0.0
        r = tl.where(positive, tl.exp2(e * tl.log2(tl.where(positive, t, 1.0))), t)
    return r


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _shifted(ptrs, mask, c):
    """``[z - c]_+`` in fp32, 0 outside ``mask``, NaN kept."""
    t = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32) - c
    return tl.where(mask & ~(t < 0.0), t, 0.0)


@triton.jit
def _loss_sums_kernel(z_ptr, sums_ptr, vocab, stride, c, e1, K1: tl.constexpr,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = z_ptr + row * stride
    acc = tl.full([BLOCK], 0.0, tl.float32)
    for start in range(0, vocab, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += _power(_shifted(base + cols, cols < vocab, c), e1, K1)
    tl.store(sums_ptr + row, tl.reduce(acc, 0, _add))


@triton.jit
def _probs_kernel(z_ptr, out_ptr, scale_ptr, vocab, z_stride, out_stride, c, e, ka,
                  K: tl.constexpr, HAS_SCALE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    t = _shifted(z_ptr + row * z_stride + cols, mask, c)
    k = ka
    if HAS_SCALE:
        k = tl.load(scale_ptr + row).to(tl.float32) * ka
    p = k * _power(t, e, K)
    tl.store(out_ptr + row * out_stride + cols, p.to(out_ptr.dtype.element_ty), mask=mask)


def _integer_power(e: float) -> int:
    """``e`` if it is an integer in 1..4, else 0 (the general power)."""
    return int(e) if e in (1.0, 2.0, 3.0, 4.0) else 0


def _block(vocab: int, most: int) -> int:
    return min(most, triton.next_power_of_2(vocab))


def loss_sums(z: torch.Tensor, c: float, e: float) -> torch.Tensor:
    """``sum_j [z_ij - c]_+^(e + 1)`` per row of ``z (N, V)`` (unit stride along V), fp32."""
    n, vocab = z.shape
    sums = torch.empty(n, dtype=torch.float32, device=z.device)
    if n:
        k = _integer_power(e)
        block = _block(vocab, _SUM_BLOCK)
        _loss_sums_kernel[(n,)](z, sums, vocab, z.stride(0), c, e + 1.0, k + 1 if k else 0,
                                BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return sums


def probs_into(z: torch.Tensor, scale: torch.Tensor | None, c: float, e: float, ka: float,
               out: torch.Tensor) -> torch.Tensor:
    """``out_ij = scale_i * ka * [z_ij - c]_+^e`` (no ``scale``: ``ka * [z - c]_+^e``)."""
    n, vocab = z.shape
    if n:
        block = _block(vocab, _PROBS_BLOCK)
        grid = (n, triton.cdiv(vocab, block))
        _probs_kernel[grid](z, out, z if scale is None else scale, vocab, z.stride(0),
                            out.stride(0), c, e, ka, K=_integer_power(e),
                            HAS_SCALE=scale is not None, BLOCK=block, num_warps=4)
    return out
