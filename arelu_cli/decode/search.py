"""Decoding: batched greedy and beam search over a model's logits, scored by an output transform.

A hypothesis scores the transform's own ``log_scores`` (log softmax, log entmax / sparsemax,
for alpha-ReLU the log of its unnormalized output, or of it over its sum with
``renormalize=True``); a token outside the support scores ``-inf``. Search reads only the
best few scores of a row (:func:`step_top_scores`, from the ``k`` largest logits for
alpha-ReLU and softmax), never the whole ``(R, V)`` score matrix. NaN logits (weights that
are not finite) are a :class:`UserError` (:func:`refuse_nan`).

Greedy search takes the arg-max logit (the first of equal ones): the same token for every
transform, all being monotone in the logits. Beam search follows OpenNMT-py (the paper's
toolkit): the ``beam`` best extensions of a sentence's live hypotheses are kept, those
ending in eos leave the beam finished, and a sentence stops once a step's best extension
was eos and it has ``n_best`` finished hypotheses, or at its length limit. Finished
hypotheses rank by ``score / ((5 + length) / 6) ** length_penalty``. A ``-inf`` candidate
never enters the beam, so a sentence may decode fewer than ``beam`` rows; one whose every
hypothesis dies returns its best prefix with score ``-inf``. The decoder runs one position
per step on cached keys/values, reordered with :meth:`DecoderState.select`.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from arelu_cli.config import DecodeConfig
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import DecoderState, Transformer
from arelu_cli.registry import OutputTransform


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]
    """Target ids without bos and eos."""
    score: float
    """Sum of the transform's log scores of the chosen tokens (eos included when ``ended``)."""
    ended: bool = True
    """False when the hypothesis stopped at the length limit (or died) without eos."""
    eos: int | None = None
    """The end-of-sequence token that ended it, where beam search was given several
    (None otherwise)."""


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ``((5 + length) / 6) ** alpha``; 1 for ``alpha = 0``."""
    return ((5.0 + length) / 6.0) ** alpha


def ranking_score(hyp: Hypothesis, alpha: float) -> float:
    """The score beam search ranks finished hypotheses by: the raw score over the length
    penalty of the generated length (eos included)."""
    return hyp.score / length_penalty(len(hyp.tokens) + int(hyp.ended), alpha)


def check_renormalize(transform: OutputTransform, renormalize: bool) -> None:
    """``--renormalize`` changes only an unnormalized transform (alpha-ReLU): refuse it
    elsewhere rather than record in a signature a setting that did nothing."""
    if renormalize and transform.normalized:
        raise UserError(f"--renormalize applies to alpha-ReLU only, whose outputs do not sum "
                        f"to 1; {transform.name} sums to 1 already, so drop --renormalize")


def step_log_scores(transform: OutputTransform, logits: torch.Tensor,
                    renormalize: bool = False) -> torch.Tensor:
    """(b, V) decoding scores of one step in float32: ``transform.log_scores``, or with
    ``renormalize`` (alpha-ReLU only changes) ``log(p / sum p)``; ``-inf`` at zeros."""
    logits = logits.float()
    scores = transform.log_scores(logits)
    if not renormalize or transform.normalized:
        return scores
    total = transform.probs(logits).sum(-1, keepdim=True)           # (b, 1)
    # An all-zero row stays all -inf instead of -inf - (-inf) = nan.
    return (scores - total.log()).masked_fill(total == 0, -math.inf)


def refuse_nan(values: torch.Tensor, doing: str = "decoding") -> None:
    """A one-line :class:`UserError` when ``values`` (logits, or scores computed from them)
    hold a NaN: the checkpoint's weights are not finite, and every number from it would be."""
    if bool(torch.isnan(values).any()):
        raise UserError(f"the model gave NaN logits while {doing}: its weights are not finite "
                        "(a run that diverged?); use an earlier checkpoint of it")


@contextmanager
def nan_logits_refused(logits: torch.Tensor, doing: str = "decoding"):
    """NaN logits as a UserError where scoring them fails (entmax's threshold search raises an
    index error on them); the other transforms give NaN scores, for :func:`refuse_nan`."""
    try:
        yield
    except RuntimeError:
        refuse_nan(logits, doing)
        raise


def step_top_scores(transform: OutputTransform, logits: torch.Tensor, k: int,
                    renormalize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best decoding scores of each row of ``logits`` (R, V) and their tokens, (R, k)
    each, best first: :func:`step_log_scores` then ``topk``, but for alpha-ReLU (without
    ``renormalize``) and softmax from the ``k`` largest logits, equal logits lower index
    first. NaN logits raise a :class:`UserError`."""
    logits = logits.float()
    with nan_logits_refused(logits):
        if renormalize and not transform.normalized:
            top = step_log_scores(transform, logits, True).topk(k, dim=1)
        else:
            top = transform.top_log_scores(logits, k)
    refuse_nan(top[0])
    return top


def _greedy_choice(transform: OutputTransform, logits: torch.Tensor,
                   renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(b,) arg-max tokens of ``logits`` (b, V), the first of equal logits, and their scores."""
    if transform.fused_top_k and not renormalize:
        scores, tokens = step_top_scores(transform, logits, 1)          # (b, 1) each
        return tokens[:, 0], scores[:, 0]
    tokens = logits.argmax(-1)                                          # (b,)
    with nan_logits_refused(logits):
        scores = step_log_scores(transform, logits, renormalize)
    chosen = scores.gather(1, tokens[:, None])[:, 0]
    refuse_nan(chosen)
    return tokens, chosen


def max_lengths(src: torch.Tensor, pad_id: int, cfg: DecodeConfig, cap: int) -> torch.Tensor:
    """(B,) most tokens to generate per sentence, eos included, at most ``cap``."""
    src_len = (src != pad_id).sum(1).float()
    limit = torch.floor(src_len * cfg.max_length_ratio) + cfg.max_length_offset
    return limit.long().clamp(1, cap)


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, transform: OutputTransform, *, bos_id: int,
           eos_id: int, limits: torch.Tensor, renormalize: bool = False) -> list[Hypothesis]:
    """Greedy hypotheses for a batch of sources ``src`` (B, S); ``limits`` (B,) from
    :func:`max_lengths`. Call with the model in eval mode."""
    batch, device = src.shape[0], src.device
    memory, src_mask = model.encode(src)
    state = model.start(memory, src_mask)
    longest = int(limits.max())
    out = torch.full((batch, longest), eos_id, dtype=torch.long, device=device)  # (B, L)
    scores = torch.zeros(batch, dtype=torch.float64, device=device)
    ended = torch.zeros(batch, dtype=torch.bool, device=device)
    alive = torch.arange(batch, device=device)           # rows of the batch still decoding
    tokens = torch.full((batch,), bos_id, dtype=torch.long, device=device)
    limits = limits.to(device)
    for t in range(longest):
        tokens, chosen = _greedy_choice(transform, model.step(tokens, state), renormalize)
        out[alive, t] = tokens
        scores.index_add_(0, alive, chosen.double())
        ended[alive] = tokens == eos_id
        done = ended[alive] | (limits[alive] <= t + 1)
        if bool(done.any()):
            keep = (~done).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            alive, tokens, state = alive[keep], tokens[keep], state.select(keep)
    return [_hypothesis(row, eos_id, float(score), end)
            for row, score, end in zip(out.tolist(), scores.tolist(), ended.tolist())]


def _hypothesis(row: list[int], eos_id: int, score: float, ended: bool) -> Hypothesis:
    end = row.index(eos_id) if eos_id in row else len(row)
    return Hypothesis(row[:end], score, ended=ended)


@dataclass
class _Live:
    """The live hypotheses of a batch, one row each (a flat batch of variable size R)."""

    sent: torch.Tensor
    """(R,) sentence of each row."""
    slot: torch.Tensor
    """(R,) rank of the row among its sentence's beam at the last step, in [0, beam)."""
    scores: torch.Tensor
    """(R,) float64 sums of log scores."""
    prefix: torch.Tensor
    """(R, t) tokens generated so far."""
    state: DecoderState


@dataclass(frozen=True)
class _Step:
    """The ``beam`` best extensions of each sentence at one step, (B, K) each."""

    parent: torch.Tensor
    """Row of ``_Live`` extended (meaningless where not ``finite``)."""
    token: torch.Tensor
    score: torch.Tensor
    finite: torch.Tensor


def _start(model: Transformer, src: torch.Tensor) -> _Live:
    """One live row per sentence, nothing generated yet."""
    batch, device = src.shape[0], src.device
    memory, src_mask = model.encode(src)
    return _Live(torch.arange(batch, device=device),
                 torch.zeros(batch, dtype=torch.long, device=device),
                 torch.zeros(batch, dtype=torch.float64, device=device),
                 torch.empty(batch, 0, dtype=torch.long, device=device),
                 model.start(memory, src_mask))


def _extend(live: _Live, row_best: torch.Tensor, row_token: torch.Tensor, batch: int,
            beam: int) -> _Step:
    """Best ``beam`` extensions per sentence of the live rows, from the ``k`` best step
    scores of each row and their tokens, (R, k) each (:func:`step_top_scores`)."""
    k, device = row_best.shape[1], row_best.device
    grid = torch.full((batch, beam * k), -math.inf, dtype=torch.float64, device=device)
    cols = live.slot[:, None] * k + torch.arange(k, device=device)
    grid[live.sent[:, None], cols] = live.scores[:, None] + row_best.double()
    best, index = grid.topk(beam, dim=1)                            # (B, K)
    row_of = torch.zeros(batch, beam, dtype=torch.long, device=device)
    row_of[live.sent, live.slot] = torch.arange(live.sent.numel(), device=device)
    parent = row_of.gather(1, index // k)
    token = row_token[parent, index % k]
    return _Step(parent, token, best, torch.isfinite(best))


def _finish(live: _Live, step: _Step, finished: list[list[Hypothesis]], *, eos: torch.Tensor,
            at_limit: torch.Tensor, done: torch.Tensor, top_ended: torch.Tensor,
            n_best: int) -> torch.Tensor:
    """Record the hypotheses that end at this step (and mark in ``top_ended``, in place, the
    sentences whose best extension was eos); return the sentences done after it (B,)."""
    running = step.finite & ~done[:, None]
    is_eos = running & torch.isin(step.token, eos)
    ends = is_eos | (running & at_limit[:, None])
    top_ended |= is_eos[:, 0]
    for b, j in ends.nonzero().tolist():
        tokens = live.prefix[step.parent[b, j]].tolist()
        ended, token = bool(is_eos[b, j]), int(step.token[b, j])
        finished[b].append(Hypothesis(tokens + ([] if ended else [token]),
                                      float(step.score[b, j]), ended=ended,
                                      eos=token if ended and eos.numel() > 1 else None))
    dead = ~step.finite[:, 0] & ~done
    for b in dead.nonzero()[:, 0].tolist():
        if not finished[b]:
            rows = (live.sent == b).nonzero()[:, 0]
            best = int(rows[live.scores[rows].argmax()])
            finished[b].append(Hypothesis(live.prefix[best].tolist(), -math.inf, ended=False))
    count = torch.tensor([len(f) for f in finished], device=done.device)
    return done | (top_ended & (count >= n_best)) | at_limit | dead


def _advance(live: _Live, step: _Step, done: torch.Tensor, eos: torch.Tensor) -> _Live:
    """The new live rows: finite, non-eos extensions of sentences not done."""
    keep = step.finite & ~torch.isin(step.token, eos) & ~done[:, None]
    sent, slot = keep.nonzero(as_tuple=True)
    parent, token = step.parent[sent, slot], step.token[sent, slot]
    prefix = torch.cat([live.prefix[parent], token[:, None]], dim=1)
    return _Live(sent, slot, step.score[sent, slot], prefix, live.state.select(parent))


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, transform: OutputTransform, *,
                bos_id: int, eos_id: int | Sequence[int], limits: torch.Tensor, beam: int,
                n_best: int = 1, length_penalty: float = 0.0,
                renormalize: bool = False) -> list[list[Hypothesis]]:
    """The ``n_best`` best hypotheses of each source of ``src`` (B, S), best first (see the
    module docstring); ``limits`` (B,) from :func:`max_lengths`; ``eos_id`` one token or
    several, any of which ends a hypothesis (its ``eos`` says which). Model in eval mode."""
    if beam < 1:
        raise UserError(f"beam must be at least 1 (1 is greedy search), got {beam}")
    if not 1 <= n_best <= beam:
        raise UserError(f"n-best must be between 1 and the beam size {beam}, got {n_best}")
    batch, device = src.shape[0], src.device
    live = _start(model, src)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    top_ended = torch.zeros_like(done)
    limits = limits.to(device)
    eos = torch.tensor(eos_id, dtype=torch.long, device=device).reshape(-1)
    tokens = torch.full((batch,), bos_id, dtype=torch.long, device=device)
    for t in range(int(limits.max())):
        logits = model.step(tokens, live.state)                                  # (R, V)
        row_best, row_token = step_top_scores(transform, logits, min(beam, logits.shape[1]),
                                              renormalize)                      # (R, k)
        step = _extend(live, row_best, row_token, batch, beam)
        done = _finish(live, step, finished, eos=eos, at_limit=limits <= t + 1, done=done,
                       top_ended=top_ended, n_best=n_best)
        live = _advance(live, step, done, eos)
        if live.sent.numel() == 0:
            break
        tokens = live.prefix[:, -1]
    return [sorted(hyps, key=lambda h: ranking_score(h, length_penalty), reverse=True)[:n_best]
            for hyps in finished]


def target_tensors(sequences: list[Hypothesis], *, bos_id: int, eos_id: int, pad_id: int,
                   device: torch.device | str = "cpu"
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forcing tensors (tgt_in, tgt_out, keep), (B, T) each, that reproduce the decoding
    steps of hypotheses: ``tgt_out`` is the tokens, then eos if the hypothesis ``ended``;
    ``keep`` marks the real positions (a hypothesis may itself contain the pad id)."""
    outs = [h.tokens + [eos_id] * h.ended for h in sequences]
    width = max(1, max(len(o) for o in outs))
    tgt_in = torch.full((len(outs), width), pad_id, dtype=torch.long)
    tgt_out = tgt_in.clone()
    keep = torch.zeros(len(outs), width, dtype=torch.bool)
    for row, out in enumerate(outs):
        if out:
            tgt_in[row, :len(out)] = torch.tensor([bos_id] + out[:-1], dtype=torch.long)
            tgt_out[row, :len(out)] = torch.tensor(out, dtype=torch.long)
            keep[row, :len(out)] = True
    return tgt_in.to(device), tgt_out.to(device), keep.to(device)


@torch.no_grad()
def sequence_scores(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor,
                    tgt_out: torch.Tensor, keep: torch.Tensor, transform: OutputTransform, *,
                    renormalize: bool = False) -> torch.Tensor:
    """(B,) float64 teacher-forced scores: the sum over the ``keep`` positions of the
    transform's step scores of ``tgt_out``, the same scores decoding adds up. NaN logits
    (weights that are not finite) raise a :class:`UserError`, never a NaN score."""
    logits = model(src, tgt_in)                                        # (B, T, V)
    batch, width, vocab = logits.shape
    with nan_logits_refused(logits, "scoring"):
        scores = step_log_scores(transform, logits.reshape(-1, vocab), renormalize)
    chosen = scores.gather(1, tgt_out.reshape(-1, 1)).view(batch, width).double()
    chosen = chosen.masked_fill(~keep, 0.0)
    refuse_nan(chosen, "scoring")
    return chosen.sum(1)

