"""The fused linear + alpha-ReLU loss on the ``triton`` engine: no host sync, static shapes.

Gradients of eq. (sp_loss) on ``logits = hidden @ weight.T + bias`` (Lemma 1,
``G = s (p - q)``): ``grad_hidden = G @ weight``, ``grad_weight = G^T @ hidden``, ``grad_bias = G^T 1``.
A loop over tiles of ``rows`` tokens x ``cols`` vocabulary columns (``fused_linear`` picks the
shape: blocks of the vocabulary over all tokens, or chunks of tokens over the whole
vocabulary) computes a tile's logits into one reused buffer (cuBLAS); one pass of
``_triton_kernels._loss_kernel`` adds the tile's share of each row's loss and overwrites the
buffer with ``G`` (``s`` the reduction's weight, so nothing is left to scale; of soft-capped
logits, the kernel caps them as it reads them and ``G`` holds the cap's derivative too). Then, by
default, the gradient products run on cuBLAS (``_tiles``): a vocabulary block's
``grad_weight`` rows are written once, by its first token block, and ``grad_hidden`` is
accumulated over the vocabulary blocks in the inputs' dtype (one rounding per block for
bf16/fp16; inside each product cuBLAS accumulates in fp32). With ``tiles=True``
(``skip_zeros=True``) the loss pass also marks each ``128 x 128`` tile of ``G`` holding a
nonzero, and two Triton GEMMs (``_grad_hidden_kernel``, ``_grad_weight_kernel``, which also
sums ``G``'s columns for the bias) skip the unmarked tiles, reading the marks on the device;
the skipped terms are exact zeros (Cut Cross-Entropy's skipped softmax tiles are
approximations). That pays only where whole tiles are zero: a test per K-tile inside the GEMM
loop costs its software pipelining, so these GEMMs are slower than cuBLAS on dense tiles.
Either way every shape depends on ``N``, ``V``, ``d`` only, so the loop runs under CUDA graph
capture. bf16/fp16 on tensor cores. Under the CPU interpreter (the tests) bf16 operands are
widened to fp32 before ``tl.dot`` (exact); no function of triton's jit standard library is
called.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from arelu_cli.transforms import _triton_kernels
from arelu_cli.transforms._tiles import add_tile_grads, tile_logits
from arelu_cli.transforms._triton_kernels import TILE, _add, on_device


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr, IEEE: tl.constexpr):
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    if IEEE:
        acc = tl.dot(a, b, acc, input_precision="ieee")
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _grad_hidden_kernel(g_ptr, w_ptr, out_ptr, flags_ptr, rows, vocab, width, g_stride,
                        w_stride, out_stride, flags_stride, BN: tl.constexpr,
                        TILE: tl.constexpr, ACCUMULATE: tl.constexpr, UPCAST: tl.constexpr,
                        IEEE: tl.constexpr):
    """One ``TILE x BN`` block of ``G @ W`` (``ACCUMULATE``: added to ``out``); consecutive
    programs take consecutive row blocks of one column block, so they share the weight panel
    they read (in L2)."""
    pid = tl.program_id(0)
    row_blocks = (rows + TILE - 1) // TILE
    block = pid % row_blocks
    m = block.to(tl.int64) * TILE + tl.arange(0, TILE)
    n = (pid // row_blocks) * BN + tl.arange(0, BN)
    k = tl.arange(0, TILE)
    acc = tl.full([TILE, BN], 0.0, tl.float32)
    for tile in range(0, (vocab + TILE - 1) // TILE):
        if tl.load(flags_ptr + block * flags_stride + tile) != 0:
            cols = tile * TILE + k
            g = tl.load(g_ptr + m[:, None] * g_stride + cols[None, :],
                        mask=(m[:, None] < rows) & (cols[None, :] < vocab), other=0.0)
            w = tl.load(w_ptr + cols[:, None].to(tl.int64) * w_stride + n[None, :],
                        mask=(cols[:, None] < vocab) & (n[None, :] < width), other=0.0)
            acc = _dot(g, w, acc, UPCAST, IEEE)
    ptrs = out_ptr + m[:, None] * out_stride + n[None, :]
    mask = (m[:, None] < rows) & (n[None, :] < width)
    if ACCUMULATE:
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _grad_weight_kernel(g_ptr, h_ptr, dw_ptr, db_ptr, flags_ptr, rows, vocab, width,
                        g_stride, h_stride, dw_stride, flags_stride, col_blocks,
                        BN: tl.constexpr, TILE: tl.constexpr, WEIGHT: tl.constexpr,
                        BIAS: tl.constexpr, UPCAST: tl.constexpr, IEEE: tl.constexpr):
    """One ``TILE x BN`` block of ``grad_weight += G^T @ hidden`` (and, in column block 0,
    ``grad_bias += G^T 1``); consecutive programs share one vocabulary tile of ``G``."""
    pid = tl.program_id(0)
    tile = pid // col_blocks
    col_block = pid % col_blocks
    v = tile.to(tl.int64) * TILE + tl.arange(0, TILE)
    n = col_block * BN + tl.arange(0, BN)
    r = tl.arange(0, TILE)
    acc = tl.full([TILE, BN], 0.0, tl.float32)
    sums = tl.full([TILE], 0.0, tl.float32)
    live = pid < 0  # a scalar False: whether any row block of the tile is marked
    for block in range(0, (rows + TILE - 1) // TILE):
        if tl.load(flags_ptr + block * flags_stride + tile) != 0:
            m = (block * TILE + r).to(tl.int64)
            gt = tl.load(g_ptr + m[None, :] * g_stride + v[:, None],  # G^T: (TILE_V, TILE_M)
                         mask=(v[:, None] < vocab) & (m[None, :] < rows), other=0.0)
            if WEIGHT:
                h = tl.load(h_ptr + m[:, None] * h_stride + n[None, :],
                            mask=(m[:, None] < rows) & (n[None, :] < width), other=0.0)
                acc = _dot(gt, h, acc, UPCAST, IEEE)
            if BIAS:
                sums += tl.reduce(gt.to(tl.float32), 1, _add)
            live = pid >= 0
    if live:
        if WEIGHT:
            ptrs = dw_ptr + v[:, None] * dw_stride + n[None, :]
            mask = (v[:, None] < vocab) & (n[None, :] < width)
            total = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32) + acc
            tl.store(ptrs, total.to(dw_ptr.dtype.element_ty), mask=mask)
        if BIAS:
            first = v < tl.where(col_block == 0, vocab, 0)
            tl.store(db_ptr + v, tl.load(db_ptr + v, mask=first, other=0.0) + sums, mask=first)


def _ieee(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32


def _col_block(t: torch.Tensor) -> tuple[int, int]:
    """Columns of ``d`` per program and software-pipeline stages, so that the operand tiles
    (128 x 128 of G and 128 x BN of the other; 64 KiB a stage in bf16/fp16, 80 KiB in fp32)
    fit the shared memory of an A100 (164 KiB) as well as an H100's."""
    return (32, 1) if t.dtype == torch.float32 else (128, 2)


def grad_hidden_into(g: torch.Tensor, weight: torch.Tensor, flags: torch.Tensor,
                     out: torch.Tensor, accumulate: bool = False) -> None:
    """``out = g @ weight`` (``accumulate``: ``out += g @ weight``) over the tiles of
    ``g (rows, V)`` marked in ``flags``."""
    rows, vocab = g.shape
    width = weight.shape[1]
    bn, stages = _col_block(g)
    grid = (triton.cdiv(rows, TILE) * triton.cdiv(width, bn),)
    with on_device(g):
        _grad_hidden_kernel[grid](g, weight, out, flags, rows, vocab, width, g.stride(0),
                                  weight.stride(0), out.stride(0), flags.stride(0), BN=bn,
                                  TILE=TILE, ACCUMULATE=accumulate, UPCAST=not g.is_cuda,
                                  IEEE=_ieee(g), num_warps=8, num_stages=stages)


def grad_weight_add(g: torch.Tensor, hidden: torch.Tensor, flags: torch.Tensor,
                    grad_w: torch.Tensor | None, grad_b: torch.Tensor | None) -> None:
    """``grad_w += g^T @ hidden`` and ``grad_b += g^T 1`` (fp32) over the marked tiles."""
    rows, vocab = g.shape
    width = hidden.shape[1]
    bn, stages = _col_block(g)
    col_blocks = triton.cdiv(width, bn) if grad_w is not None else 1
    grid = (triton.cdiv(vocab, TILE) * col_blocks,)
    with on_device(g):
        _grad_weight_kernel[grid](
            g, hidden, g if grad_w is None else grad_w, g if grad_b is None else grad_b, flags,
            rows, vocab, width, g.stride(0), hidden.stride(0),
            0 if grad_w is None else grad_w.stride(0), flags.stride(0), col_blocks, BN=bn,
            TILE=TILE, WEIGHT=grad_w is not None, BIAS=grad_b is not None,
            UPCAST=not g.is_cuda, IEEE=_ieee(g), num_warps=8, num_stages=stages)


def run(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
        target: torch.Tensor, scale: torch.Tensor | None, alpha: float, tau: float, eps: float,
        ignore_index: int, rows: int, cols: int, want: tuple[bool, bool, bool],
        tiles: bool = False, softcap: float | None = None):
    """The tile loop: per-row losses (fp32) and, given ``scale`` (each row's factor, fp32
    ``(N,)``), the gradients (hidden, weight, bias) flagged in ``want`` (None otherwise),
    in the inputs' dtypes. ``hidden (N, d)`` and ``weight (V, d)`` contiguous, one dtype;
    tiles of ``rows`` tokens x ``cols`` vocabulary columns, token blocks outside; gradient
    products on cuBLAS, or (``tiles``) on the Triton GEMMs that skip the all-zero tiles of
    ``G``; ``softcap``: the loss of the capped logits (``_triton_kernels.loss_pass``)."""
    n, d = hidden.shape
    vocab, device = weight.shape[0], hidden.device
    with_grads = scale is not None
    losses = torch.zeros(n, dtype=torch.float32, device=device)
    grad_h = torch.empty_like(hidden) if with_grads and want[0] else None
    # Each tile's products write their block of a gradient or add to it; the tile-skipping
    # GEMM of grad_weight only adds, and only to tiles it reaches.
    grad_w = ((torch.zeros_like if tiles else torch.empty_like)(weight)
              if with_grads and want[1] else None)
    grad_b = (torch.zeros(vocab, dtype=torch.float32, device=device)
              if with_grads and want[2] and bias is not None else None)
    flags = (torch.empty(triton.cdiv(min(rows, n), TILE), triton.cdiv(min(cols, vocab), TILE),
                         dtype=torch.int32, device=device) if with_grads and tiles else None)
    for r0, r1, v0, v1, h, w, logits in tile_logits(hidden, weight, bias, rows, cols):
        marks = None
        if flags is not None:
            marks = flags[:triton.cdiv(r1 - r0, TILE), :triton.cdiv(v1 - v0, TILE)]
            marks.fill_(0)
        _triton_kernels.loss_pass(logits, target[r0:r1], alpha, tau, eps, ignore_index,
                                  grad=logits if with_grads else None,
                                  scale=scale[r0:r1] if with_grads else None,
                                  flags=marks, rows=losses[r0:r1], col0=v0, total=vocab,
                                  softcap=softcap)
        if not with_grads:
            continue
        tile_h = None if grad_h is None else grad_h[r0:r1]
        tile_w = None if grad_w is None else grad_w[v0:v1]
        tile_b = None if grad_b is None else grad_b[v0:v1]
        if marks is None:
            add_tile_grads(logits, h, w, tile_h, tile_w, tile_b, first_h=v0 == 0,
                           first_w=r0 == 0)
            continue
        if tile_h is not None:
            grad_hidden_into(logits, w, marks, tile_h, accumulate=v0 > 0)
        if tile_w is not None or tile_b is not None:
            grad_weight_add(logits, h, marks, tile_w, tile_b)
    return losses, grad_h, grad_w, None if grad_b is None else grad_b.to(bias.dtype)
