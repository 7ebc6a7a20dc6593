"""Metrics of language models and of the text they generate (after Martins, Marinho
& Martins 2020, "Sparse Text Generation", EMNLP, whose metrics we adopt so that our numbers sit
beside theirs).

**Teacher-forced**, from each step's distribution ``probs (N, V)`` (the one sampled from,
:func:`arelu_cli.decode.sampling.sampling_probs`: alpha-ReLU's output divided by its sum on its
support, the arg-max's point mass where the support is empty), its targets ``(N,)`` and the
previous gold tokens of the same item (:func:`previous_tokens`; :func:`batch_step_values` does
all of it for an LM batch of logits and padded targets). :func:`step_values` reduces
each batch to a few numbers per step (never keeping ``N x V``); concatenate them over batches
(:func:`concat`) and summarize (:func:`summarize`) or sum per item (:func:`per_item`, for the
paired bootstrap over test sentences). Natural logarithms throughout.

**On generated text** (lists of token lists, the same prompts for every system):
distinct-n, looping, Zipf coefficient, self-BLEU and length (:func:`text_stats`), and each
statistic's absolute distance to the human continuations' (:func:`distance_to_human`).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import torch

from arelu_cli.decode.sampling import Decoding, sampling_probs
from arelu_cli.registry import OutputTransform

WINDOWS = (16, 32, 128)
"""The rep/wrep context lengths of Martins et al. (2020)."""
EPS_GRID = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
"""Candidate epsilons of :func:`tune_eps` (Martins et al. tune eps on dev; their default
``--epsilon`` is 1e-6)."""
QUANTILES = (0.1, 0.5, 0.9)

Text = Sequence[Hashable]


# ------------------------------------------------------------------ teacher-forced
def previous_tokens(targets: torch.Tensor, window: int = max(WINDOWS)) -> torch.Tensor:
    """``(B, T, window)``: for each step ``t`` of ``targets (B, T)`` the gold tokens
    ``targets[b, t - window : t]`` of the same item, oldest first, left-padded with -1 (any
    negative target, e.g. an ignore index, also reads as absent). Martins et al.'s context
    of rep/wrep: the previous gold tokens of the same block."""
    if targets.dim() != 2 or window < 1:
        raise ValueError(f"targets must be (B, T) and window >= 1, got {tuple(targets.shape)}, "
                         f"{window}")
    padded = torch.nn.functional.pad(targets.long().clamp_min(-1), (window, 0), value=-1)
    return padded.unfold(1, window, 1)[:, :targets.shape[1]]


def _check_probs(probs: torch.Tensor, targets: torch.Tensor) -> None:
    if probs.dim() != 2 or targets.shape != probs.shape[:1]:
        raise ValueError(f"probs must be (N, V) and targets (N,), got {tuple(probs.shape)} and "
                         f"{tuple(targets.shape)}")
    if bool(torch.isnan(probs).any()):
        raise ValueError("probs hold NaN: check the model's logits")
    if targets.numel() and not 0 <= int(targets.min()) <= int(targets.max()) < probs.shape[1]:
        raise ValueError(f"targets must be token ids in [0, {probs.shape[1]}); drop ignored "
                         "(padding) steps first")


def step_values(probs: torch.Tensor, targets: torch.Tensor,
                previous: torch.Tensor | None = None,
                windows: Sequence[int] = WINDOWS) -> dict[str, torch.Tensor]:
    """Per-step values ``(N,)`` (float64) of one batch, from which every teacher-forced
    metric follows: ``p_target`` (``p_y``), ``sq_norm`` (``||p||^2``), ``support`` (tokens of
    positive probability), and with ``previous (N, L)`` (:func:`previous_tokens`, ``L >=``
    every window) ``rep_<l>`` and ``wrep_<l>`` for each window ``l``:

    ``rep_l = sum_{v in W} p_v`` and ``wrep_l = sum_{v in W, v != y} p_v``, with ``W`` the set of
    the previous ``l`` gold tokens: the probability that a token sampled from the model
    (teacher-forced) repeats one of them (for wrep: and is not the gold token). Martins et
    al. (2020; their code ``repeat_at_1``, after Welleck et al. 2020's greedy rep/wrep)
    draw one token per step and count; this is that count's expectation, computed exactly
    (no seed, less variance)."""
    _check_probs(probs, targets)
    p_target = probs.gather(1, targets.unsqueeze(1)).squeeze(1).double()
    sq_norm = torch.bmm(probs.unsqueeze(1), probs.unsqueeze(2)).reshape(-1)  # no N x V copy
    values = {"p_target": p_target, "sq_norm": sq_norm.double(),
              "support": torch.count_nonzero(probs, dim=1).double()}
    if previous is None:
        return values
    if previous.shape[0] != probs.shape[0] or previous.shape[1] < max(windows):
        raise ValueError(f"previous must be (N, L) with L >= {max(windows)}, got "
                         f"{tuple(previous.shape)}")
    for window in windows:
        # the distinct tokens of the window: the first of each run of a sorted copy
        recent = previous[:, -window:].sort(dim=1).values
        first = torch.ones_like(recent, dtype=torch.bool)
        first[:, 1:] = recent[:, 1:] != recent[:, :-1]
        mass = (probs.gather(1, recent.clamp_min(0)).double() * (first & (recent >= 0))).sum(1)
        gold_seen = (recent == targets.unsqueeze(1)).any(1)
        values[f"rep_{window}"] = mass
        values[f"wrep_{window}"] = mass - torch.where(gold_seen, p_target, 0.0)
    return values


def batch_step_values(logits: torch.Tensor, targets: torch.Tensor, transform: OutputTransform,
                      decoding: Decoding = Decoding(), ignore_index: int = -100,
                      windows: Sequence[int] = WINDOWS,
                      scored: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """:func:`step_values` of one teacher-forced LM batch, ``logits (B, T, V)`` and
    ``targets (B, T)`` (``ignore_index`` where padded), under the distribution sampled from
    (:func:`arelu_cli.decode.sampling.sampling_probs`), with each row's previous gold tokens as
    context; ``item`` is each counted step's row ``b`` (add the batch's offset for
    :func:`per_item`). ``scored (B, T)``, if given, counts only those steps (a sliding
    window's context positions are context for rep/wrep, not counted)."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and targets (B, T), got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    if scored is not None and scored.shape != targets.shape:
        raise ValueError(f"scored must be (B, T) like targets, got {tuple(scored.shape)}")
    valid = targets != ignore_index
    keep = valid if scored is None else valid & scored
    previous = previous_tokens(targets.masked_fill(~valid, -1), max(windows))
    probs = sampling_probs(logits[keep], transform, decoding)
    values = step_values(probs, targets[keep], previous[keep], windows)
    rows = torch.arange(targets.shape[0], device=targets.device).unsqueeze(1)
    values["item"] = rows.expand_as(targets)[keep]
    return values


def concat(batches: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The per-step values of several batches (:func:`step_values`) as one."""
    if not batches:
        raise ValueError("no batches to concatenate")
    return {key: torch.cat([b[key] for b in batches]) for key in batches[0]}


def sparsemax_score(p_target: torch.Tensor, sq_norm: torch.Tensor) -> torch.Tensor:
    """Per step ``sp = 1 - 1/2 ||p - e_y||^2 = p_y - 1/2 ||p||^2 + 1/2`` (Martins et al.
    2020), in [0, 1], and 1 only for ``p = e_y``."""
    return p_target - 0.5 * sq_norm + 0.5


def jsd_to_target(p_target: torch.Tensor) -> torch.Tensor:
    """Per step the Jensen-Shannon divergence between ``p`` and ``e_y`` (Martins et al. 2020),
    natural log: ``JS = 1/2 KL(p || m) + 1/2 KL(e_y || m)``, ``m = (p + e_y) / 2``.
    It depends on ``p_y`` alone: ``1/2 [2 log 2 + p_y log p_y - (1 + p_y) log(1 + p_y)]``,
    from ``log 2`` (``p_y = 0``) down to 0 (``p_y = 1``): it lies in [0, log 2]."""
    p = p_target.double()
    plogp = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1.0)), 0.0)
    return 0.5 * (2 * math.log(2) + plogp - (1 + p) * torch.log1p(p))


def perplexity(p_target: torch.Tensor) -> float:
    """``exp(-mean log p_y)``: inf when some target has probability 0 (a sparse model)."""
    return math.exp(-float(torch.log(p_target.double()).mean()))


def smoothed_log_probs(p_target: torch.Tensor, eps: float, vocab: int) -> torch.Tensor:
    """Per step ``log p'_y`` with Martins et al. (2020)'s smoothing
    ``p'_y = (p_y + eps) / (1 + eps |V|)`` (sum them per item for a bootstrap)."""
    if not eps >= 0 or vocab < 1:
        raise ValueError(f"eps must be >= 0 and vocab >= 1, got {eps}, {vocab}")
    return torch.log((p_target.double() + eps) / (1 + eps * vocab))


def eps_perplexity(p_target: torch.Tensor, eps: float, vocab: int) -> float:
    """epsilon-perplexity (Martins et al. 2020): ``exp(-mean log p'_y)``, the perplexity of
    the smoothed ``p'`` of :func:`smoothed_log_probs`, finite for sparse models."""
    return math.exp(-float(smoothed_log_probs(p_target, eps, vocab).mean()))


def tune_eps(dev_p_target: torch.Tensor, vocab: int,
             grid: Sequence[float] = EPS_GRID) -> tuple[float, float]:
    """``(eps, eps-perplexity)``: the eps of ``grid`` with the best eps-perplexity on dev
    (the smallest eps on ties), to report the test eps-perplexity at (Martins et al.)."""
    if not grid:
        raise ValueError("the eps grid is empty")
    scored = sorted((eps_perplexity(dev_p_target, eps, vocab), eps) for eps in grid)
    return scored[0][1], scored[0][0]


def summarize(values: Mapping[str, torch.Tensor], vocab: int, eps: float,
              quantiles: Sequence[float] = QUANTILES) -> dict[str, float]:
    """Corpus-level metrics from concatenated :func:`step_values`: ``ppl`` (inf where a
    target got 0), ``eps_ppl`` at ``eps``, mean ``sp`` and ``jsd``, ``zero_share`` (share of
    targets of probability 0), ``support_mean`` and ``support_q<q>``, and the mean of every
    ``rep_<l>``/``wrep_<l>`` (over steps, as Martins et al. average over blocks of equal
    length)."""
    p = values["p_target"]
    if p.numel() == 0:
        raise ValueError("no steps to summarize")
    support = values["support"].double()
    out = {"ppl": perplexity(p), "eps_ppl": eps_perplexity(p, eps, vocab), "eps": eps,
           "sp": float(sparsemax_score(p, values["sq_norm"]).mean()),
           "jsd": float(jsd_to_target(p).mean()), "zero_share": float((p == 0).double().mean()),
           "support_mean": float(support.mean()), "steps": int(p.numel())}
    for q in quantiles:
        out[f"support_q{round(100 * q)}"] = float(torch.quantile(support, q))
    for key in values:
        if key.startswith(("rep_", "wrep_")):
            out[key] = float(values[key].mean())
    return out


def per_item(values: torch.Tensor, items: torch.Tensor, n_items: int) -> torch.Tensor:
    """``(n_items,)`` sums of per-step ``values (N,)`` by item id ``items (N,)`` (sentence or
    block): with the per-item step counts (``per_item(ones, ...)``), what a paired
    bootstrap over test items resamples."""
    if values.shape != items.shape:
        raise ValueError(f"values and items must have the same shape, got {tuple(values.shape)}"
                         f" and {tuple(items.shape)}")
    return torch.zeros(n_items, dtype=torch.float64, device=values.device).index_add_(
        0, items.long(), values.double())


# ------------------------------------------------------------------ generated text
def _ngrams(text: Text, n: int) -> list[tuple]:
    return [tuple(text[i:i + n]) for i in range(len(text) - n + 1)]


def distinct_n(texts: Sequence[Text], n: int) -> float:
    """distinct-n (Li et al. 2016): distinct n-grams over all n-grams, pooled over the
    texts (NaN when they have no n-gram)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    grams = [g for text in texts for g in _ngrams(text, n)]
    return len(set(grams)) / len(grams) if grams else math.nan


def distinct_per_item(texts: Sequence[Text], n: int) -> list[float]:
    """distinct-n of each text alone (NaN for a text shorter than n)."""
    return [distinct_n([text], n) for text in texts]


def loops(text: Text, n: int = 4) -> bool:
    """Whether ``text`` ends in a loop: its final n-gram occurs earlier in it (overlaps
    allowed). Our definition of Holtzman et al. (2020)'s "repetition" (generations that end
    in a repeating phrase), a per-text 0/1 whose mean is the looping share."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if len(text) <= n:
        return False
    last = tuple(text[-n:])
    return any(tuple(text[i:i + n]) == last for i in range(len(text) - n))


def zipf_coefficient(texts: Sequence[Text]) -> float:
    """Zipf coefficient (Holtzman et al. 2020): ``s = -slope`` of the least-squares
    line of log frequency against log rank of the texts' unigrams (pooled; NaN for fewer
    than two distinct tokens). Human English text is near 1."""
    counts = sorted(Counter(tok for text in texts for tok in text).values(), reverse=True)
    if len(counts) < 2:
        return math.nan
    x = torch.log(torch.arange(1, len(counts) + 1, dtype=torch.float64))
    y = torch.log(torch.tensor(counts, dtype=torch.float64))
    slope = ((x - x.mean()) * (y - y.mean())).sum() / (x - x.mean()).square().sum()
    return -float(slope)


def _closest(length: int, others: Sequence[int]) -> int:
    """sacrebleu's reference length: the closest to ``length``, the shorter on ties."""
    return min(others, key=lambda r: (abs(length - r), r))


def self_bleu_per_item(texts: Sequence[Text], sample: int = 200, seed: int = 0,
                       max_order: int = 4) -> list[float]:
    """Self-BLEU (Zhu et al. 2018, Texygen): the BLEU of each text of a seeded sample of at
    most ``sample`` texts against all the other sampled texts as references; higher is less
    diverse. sacrebleu's sentence BLEU (exp smoothing, effective order, tokens as given),
    from n-gram counts taken once per text: a reference count is the largest among the
    *other* texts (the two largest of each n-gram are kept), which is what
    ``BLEU.sentence_score(text, others)`` clips to, without its per-call re-counting."""
    from sacrebleu.metrics import BLEU

    if sample < 2:
        raise ValueError(f"self-BLEU needs a sample of at least 2 texts, got {sample}")
    chosen = list(range(len(texts)))
    if len(chosen) > sample:
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    lines = [list(texts[i]) for i in chosen]
    if len(lines) < 2:
        return []
    counts = [Counter(g for n in range(1, max_order + 1) for g in _ngrams(t, n)) for t in lines]
    top: dict[tuple, list] = {}                      # gram -> [largest, its text, second]
    for i, grams in enumerate(counts):
        for gram, k in grams.items():
            best = top.setdefault(gram, [0, -1, 0])
            if k > best[0]:
                best[:] = [k, i, best[0]]
            elif k > best[2]:
                best[2] = k
    lengths, scores = [len(t) for t in lines], []
    for i, grams in enumerate(counts):
        correct = [0] * max_order
        for gram, k in grams.items():
            best = top[gram]
            correct[len(gram) - 1] += min(k, best[2] if best[1] == i else best[0])
        total = [max(0, lengths[i] - n + 1) for n in range(1, max_order + 1)]
        ref_len = _closest(lengths[i], lengths[:i] + lengths[i + 1:])
        scores.append(BLEU.compute_bleu(correct, total, lengths[i], ref_len,
                                        smooth_method="exp", effective_order=True,
                                        max_ngram_order=max_order).score)
    return scores


def text_stats(texts: Sequence[Text], *, loop_n: int = 4, self_bleu_sample: int = 200,
               seed: int = 0) -> dict[str, float]:
    """Pooled statistics of generated (or human) continuations: ``distinct_1..4``, ``loop``
    (share of texts that end in a loop, :func:`loops`), ``zipf``, ``self_bleu`` (mean over
    the sample) and ``length`` (mean tokens)."""
    if not texts:
        raise ValueError("no texts to measure")
    out = {f"distinct_{n}": distinct_n(texts, n) for n in range(1, 5)}
    out["loop"] = sum(loops(t, loop_n) for t in texts) / len(texts)
    out["zipf"] = zipf_coefficient(texts)
    scores = self_bleu_per_item(texts, self_bleu_sample, seed)
    out["self_bleu"] = sum(scores) / len(scores) if scores else math.nan
    out["length"] = sum(len(t) for t in texts) / len(texts)
    return out


def distance_to_human(stats: Mapping[str, float],
                      human: Mapping[str, float]) -> dict[str, float]:
    """``<name>_gap = |stats[name] - human[name]|`` for every statistic of both."""
    return {f"{k}_gap": abs(stats[k] - human[k]) for k in stats if k in human}


# ------------------------------------------------------------------ resampled text statistics
# For a bootstrap over prompts: ``counts (R, N)`` says how often each of the N texts is drawn
# in each of R resamples; each helper gives the pooled statistic of every resample at once,
# equal to the plain function on the resampled list (a text drawn twice counts twice).
def _item_counts(rows: Sequence[Sequence[Hashable]], distinct: bool = False) -> torch.Tensor:
    """``(K, len(rows))`` sparse float64 matrix: how often item k occurs in row i (1 for
    ``distinct``: whether it occurs), distinct items in order of first appearance."""
    index: dict[Hashable, int] = {}
    found = Counter((index.setdefault(item, len(index)), i) for i, row in enumerate(rows)
                    for item in (dict.fromkeys(row) if distinct else row))
    at = torch.tensor(list(found), dtype=torch.long).reshape(-1, 2).T
    return torch.sparse_coo_tensor(at, torch.tensor(list(found.values()), dtype=torch.float64),
                                   (len(index), len(rows)), check_invariants=True).coalesce()


def _check_counts(counts: torch.Tensor, texts: Sequence[Text]) -> torch.Tensor:
    if counts.dim() != 2 or counts.shape[1] != len(texts):
        raise ValueError(f"counts must be (R, {len(texts)}), got {tuple(counts.shape)}")
    return counts.double()


CHUNK_ROWS = 128
"""Resamples scored at once: bounds the ``(resamples, distinct items)`` arrays in memory."""


def _chunked(score, counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([score(counts[i:i + CHUNK_ROWS])
                      for i in range(0, counts.shape[0], CHUNK_ROWS)] or [counts.new_zeros(0)])


def resampled_distinct_n(texts: Sequence[Text], n: int, counts: torch.Tensor) -> torch.Tensor:
    """``(R,)`` :func:`distinct_n` of each resample: distinct n-grams of the drawn texts over
    their n-grams counted with multiplicity (NaN for a resample without n-grams). An n-gram
    of one text only is present exactly when that text is drawn; the others are counted
    through their sparse text incidence."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    counts = _check_counts(counts, texts)
    grams = [_ngrams(t, n) for t in texts]
    lengths = torch.tensor([len(g) for g in grams], dtype=torch.float64)
    where = _item_counts(grams, distinct=True)                        # (K, N)
    rows, cols = where.indices()
    shared = torch.bincount(rows, minlength=where.shape[0])[rows] > 1
    own = torch.bincount(cols[~shared], minlength=len(texts)).double()  # (N,)
    shared_rows = torch.unique(rows[shared], return_inverse=True)[1]
    among = torch.sparse_coo_tensor(torch.stack([shared_rows, cols[shared]]),
                                    torch.ones(int(shared.sum()), dtype=torch.float64),
                                    (int(shared_rows.max()) + 1 if shared.any() else 0,
                                     len(texts)), check_invariants=True)

    def score(part: torch.Tensor) -> torch.Tensor:
        drawn = (part > 0).double()
        distinct = drawn @ own + (torch.sparse.mm(among, drawn.T) > 0).sum(0)
        total = part @ lengths
        return torch.where(total > 0, distinct / total.clamp_min(1), math.nan)
    return _chunked(score, counts)


def resampled_zipf(texts: Sequence[Text], counts: torch.Tensor) -> torch.Tensor:
    """``(R,)`` :func:`zipf_coefficient` of each resample: the least-squares slope of log
    frequency on log rank of the drawn texts' pooled unigram counts (NaN for fewer than two
    distinct tokens)."""
    counts = _check_counts(counts, texts)
    per_text = _item_counts(texts)                                    # (U, N)
    x = torch.log(torch.arange(1, per_text.shape[0] + 1, dtype=torch.float64))

    def score(part: torch.Tensor) -> torch.Tensor:
        freq = torch.sparse.mm(per_text, part.T).T                    # (R, U)
        freq = freq.sort(dim=1, descending=True).values
        kept = freq > 0
        k = kept.sum(1)
        kf = k.double().clamp_min(1)
        y = torch.log(freq.clamp_min(1))          # 0 where absent: adds nothing to the sums
        sx, sy = (x * kept).sum(1), y.sum(1)
        sxx, sxy = (x * x * kept).sum(1), (y @ x)
        slope = (sxy - sx * sy / kf) / (sxx - sx * sx / kf)
        return torch.where(k >= 2, -slope, math.nan)
    return _chunked(score, counts)


def resampled_mean(values: Sequence[float], counts: torch.Tensor) -> torch.Tensor:
    """``(R,)`` mean of per-text ``values`` over each resample (e.g. :func:`loops`' 0/1: the
    looping share)."""
    counts = _check_counts(counts, values)
    return counts @ torch.tensor(values, dtype=torch.float64) / counts.sum(1)
