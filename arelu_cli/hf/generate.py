"""``model.generate`` scored by the output transform's own probabilities.

``transformers``' beam search adds ``log_softmax`` of the raw logits before any logits
processor, and alpha-ReLU with a fixed tau is not shift-invariant, so no processor can make
its scores exact. Instead greedy and beam search here are arelu's own
(:func:`arelu_cli.decode.search.greedy` / :func:`~arelu_cli.decode.search.beam_search`, as
``arelu translate`` runs them) on the model's logits (:mod:`arelu_cli.hf.search`): a
hypothesis' score is the sum of the transform's ``log_scores`` (``-inf`` where p = 0, so
a zero-probability token never enters a beam; ``renormalize=True`` divides alpha-ReLU by
its sum per step), finished hypotheses rank by GNMT's ``score / ((5 + len) / 6) **
length_penalty``. Sampling draws each token from the transform's output divided by its sum
(alpha-ReLU's need not sum to one), so a token of probability zero is never drawn; a row
whose alpha-ReLU output is all zero (no support) stops there, without eos, with score
``-inf``.

Like ``transformers``' own, it takes ``do_sample``, ``num_beams``, ``num_return_sequences``,
``max_new_tokens``, ``max_length`` and the special tokens from ``model.generation_config``
(or a ``generation_config=`` argument) where the call does not give them, and refuses a
config that sets an option it does not implement (:data:`NOT_IMPLEMENTED`: top-k, top-p,
temperature, repetition penalties, ...), rather than ignoring it; a right-padded prompt
(the next token would follow a pad) is refused too. The model runs in eval mode (restored
afterwards). Outputs follow ``generate()``: a
``(B * num_return_sequences, length)`` LongTensor, the prompt (causal LMs) or the decoder
start token (seq2seq) then the generated tokens and eos, right-padded with the pad id; with
``return_dict_in_generate=True`` a :class:`SearchOutput` that adds each row's score.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from arelu_cli.hf.search import CausalSearch, Seq2SeqSearch
from arelu_cli.decode.search import Hypothesis, beam_search, greedy, step_log_scores
from arelu_cli.registry import OutputTransform


NOT_IMPLEMENTED = {
    # option: its neutral values (None: unset); sampling-only options are checked when sampling
    "temperature": (None, 1.0), "top_k": (None, 0), "top_p": (None, 1.0), "min_p": (None, 0.0),
    "typical_p": (None, 1.0), "epsilon_cutoff": (None, 0.0), "eta_cutoff": (None, 0.0),
    "top_h": (None,),
    "repetition_penalty": (None, 1.0), "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0), "encoder_no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,), "sequence_bias": (None,), "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,), "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,), "min_length": (None, 0), "min_new_tokens": (None, 0),
    "num_beam_groups": (None, 1), "diversity_penalty": (None, 0.0),
    "penalty_alpha": (None,), "guidance_scale": (None, 1.0), "constraints": (None,),
    "force_words_ids": (None,), "exponential_decay_length_penalty": (None,),
    "renormalize_logits": (None, False), "watermarking_config": (None,),
}
"""``GenerationConfig`` options arelu's search does not implement, with their neutral values."""
SAMPLING_ONLY = ("temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff",
                 "eta_cutoff", "top_h")


@dataclass(frozen=True)
class SearchOutput:
    sequences: torch.Tensor
    """(B * n, L) as ``generate()`` returns them."""
    sequences_scores: torch.Tensor
    """(B * n,) float64 sums of the transform's log scores (eos included; not divided by
    the length penalty)."""
    ended: torch.Tensor
    """(B * n,) whether the row ended with eos (False: it reached max_new_tokens)."""


@contextmanager
def _eval_mode(model: torch.nn.Module):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _special(model, value, name: str, config=None) -> int | None:
    """A special token id: ``value``, else the generation config's (``config``, default
    ``model.generation_config``), else the model config's."""
    config = model.generation_config if config is None else config
    for source in (value, getattr(config, name, None),
                   getattr(model.config, name, None)):
        if source is not None:
            if isinstance(source, (list, tuple)):
                if len(source) != 1:
                    raise ValueError(f"arelu's search takes one {name}, got {list(source)}")
                source = source[0]
            return int(source)
    return None


@torch.no_grad()
def sample(search, src: torch.Tensor, transform: OutputTransform, *, bos_id: int, eos_id: int,
           max_new_tokens: int, renormalize: bool = False,
           generator: torch.Generator | None = None) -> list[Hypothesis]:
    """One hypothesis per row of ``src`` (B, S), each token drawn from the transform's
    output normalized by its sum; the score adds ``step_log_scores`` of the drawn tokens. A
    row whose output is all zero (alpha-ReLU with no support) has no token to draw: it stops
    there, without eos, with score ``-inf`` (as a beam hypothesis with no finite
    continuation dies)."""
    memory, mask = search.encode(src)
    state = search.start(memory, mask)
    rows, device = src.shape[0], src.device
    tokens = torch.full((rows,), bos_id, dtype=torch.long, device=device)
    scores = torch.zeros(rows, dtype=torch.float64, device=device)
    ended = torch.zeros(rows, dtype=torch.bool, device=device)
    stopped = torch.zeros(rows, dtype=torch.bool, device=device)       # ended or died
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    drawn_steps = []
    for _ in range(max_new_tokens):
        logits = search.step(tokens, state).float()                           # (R, V)
        probs = transform.probs(logits)
        died = (probs.sum(-1) == 0) & ~stopped
        scores[died] = -math.inf
        stopped |= died
        # Stopped rows draw from a placeholder; what they draw is never kept.
        probs[stopped] = 1.0
        drawn = torch.multinomial(probs, 1, generator=generator)[:, 0]        # (R,)
        step = step_log_scores(transform, logits, renormalize).gather(1, drawn[:, None])[:, 0]
        scores += torch.where(stopped, 0.0, step.double())
        lengths += (~stopped).long()
        ended |= (drawn == eos_id) & ~stopped
        stopped |= ended
        tokens = drawn
        drawn_steps.append(drawn)
        if bool(stopped.all()):
            break
    seqs = torch.stack(drawn_steps, 1).tolist()
    return [Hypothesis(seq[:n - int(end)], score, ended=end)
            for seq, n, score, end in zip(seqs, lengths.tolist(), scores.tolist(),
                                          ended.tolist())]


def pack_hypotheses(prefix: torch.Tensor, hyps: list[list[Hypothesis]], eos_id: int,
                    pad_id: int) -> SearchOutput:
    """Rows ``prefix[b] + tokens (+ eos)`` of every hypothesis, right-padded with ``pad_id``."""
    rows, scores, ended = [], [], []
    for b, group in enumerate(hyps):
        for h in group:
            rows.append(prefix[b].tolist() + h.tokens + [eos_id] * h.ended)
            scores.append(h.score)
            ended.append(h.ended)
    width = max(len(r) for r in rows)
    sequences = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        sequences[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return SearchOutput(sequences.to(prefix.device), torch.tensor(scores, dtype=torch.float64),
                        torch.tensor(ended))


def _hypotheses(search, src: torch.Tensor, transform: OutputTransform, *, bos: int, eos: int,
                max_new_tokens: int, num_beams: int, n: int, length_penalty: float,
                do_sample: bool, renormalize: bool,
                generator: torch.Generator | None) -> list[list[Hypothesis]]:
    """The ``n`` hypotheses of each row of ``src``: sampled, greedy or beam search."""
    if do_sample:
        draws = [sample(search, src, transform, bos_id=bos, eos_id=eos,
                        max_new_tokens=max_new_tokens, renormalize=renormalize,
                        generator=generator) for _ in range(n)]
        return [list(group) for group in zip(*draws)]
    limits = torch.full((len(src),), max_new_tokens, dtype=torch.long)
    if num_beams == 1:
        return [[h] for h in greedy(search, src, transform, bos_id=bos, eos_id=eos,
                                    limits=limits, renormalize=renormalize)]
    return beam_search(search, src, transform, bos_id=bos, eos_id=eos, limits=limits,
                       beam=num_beams, n_best=n, length_penalty=length_penalty,
                       renormalize=renormalize)


def _search(self, src: torch.Tensor, mask: torch.Tensor, config):
    """The search adapter, the first decoder input and each row's output prefix (B, P)."""
    if not self.config.is_encoder_decoder:
        return CausalSearch(self, mask), 0, src        # bos: ignored by the first step
    bos = _special(self, None, "decoder_start_token_id", config)
    if bos is None:
        raise ValueError("the model's config has no decoder_start_token_id")
    return Seq2SeqSearch(self, mask), bos, torch.full((len(src), 1), bos, dtype=torch.long,
                                                      device=src.device)


def _from_config(config, do_sample, num_beams, num_return_sequences, max_new_tokens,
                 max_length) -> tuple[bool, int, int, int | None, int | None]:
    """The call's search options, each taken from ``config`` (a ``GenerationConfig``) where
    the call leaves it None; a ValueError for an option of ``config`` that is not
    implemented (:data:`NOT_IMPLEMENTED`) or for beam sampling."""
    def pick(given, name, default):
        if given is not None:
            return given
        found = getattr(config, name, None)
        return default if found is None else found

    do_sample = bool(pick(do_sample, "do_sample", False))
    num_beams = int(pick(num_beams, "num_beams", 1))
    num_return_sequences = int(pick(num_return_sequences, "num_return_sequences", 1))
    if max_new_tokens is None and max_length is None:
        max_new_tokens, max_length = (getattr(config, "max_new_tokens", None),
                                      getattr(config, "max_length", None))
    set_options = [f"{name}={getattr(config, name)!r}"
                   for name, neutral in NOT_IMPLEMENTED.items()
                   if getattr(config, name, None) not in neutral
                   and (do_sample or name not in SAMPLING_ONLY)]
    if set_options:
        raise ValueError(f"the generation config sets {', '.join(set_options)}, which arelu's "
                         "generate does not implement (alpha-ReLU sampling is already "
                         "truncated to its support); pass generation_config=GenerationConfig() "
                         "or unset them in model.generation_config")
    if do_sample and num_beams > 1:
        raise ValueError(f"do_sample with num_beams={num_beams} (beam sampling) is not "
                         "implemented; sample with num_beams=1 or search with do_sample=False")
    return do_sample, num_beams, num_return_sequences, max_new_tokens, max_length


def _check_left_padded(model, mask: torch.Tensor) -> None:
    if not model.config.is_encoder_decoder and bool((mask[:, -1] == 0).any()):
        raise ValueError("a prompt is right-padded (attention_mask is 0 at its last position), "
                         "so the next token would follow a pad; set tokenizer.padding_side = "
                         "'left'")


def generate(self, inputs: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
             *, input_ids: torch.Tensor | None = None, max_new_tokens: int | None = None,
             max_length: int | None = None, num_beams: int | None = None,
             num_return_sequences: int | None = None, length_penalty: float = 0.0,
             do_sample: bool | None = None, renormalize: bool | None = None,
             eos_token_id: int | None = None, pad_token_id: int | None = None,
             generator: torch.Generator | None = None, return_dict_in_generate: bool = False,
             generation_config=None, **unsupported):
    """``model.generate`` after :func:`arelu_cli.hf.use_transform` (see the module docstring).

    ``inputs``/``input_ids`` (B, S): the prompt (causal LM, left-padded with
    ``attention_mask``) or the source (seq2seq). ``max_new_tokens`` (default 20; or
    ``max_length`` of the output rows) counts eos. ``num_beams`` > 1: beam search with
    ``num_return_sequences`` best hypotheses (at most ``num_beams``); ``do_sample``: sampling
    (``num_return_sequences`` draws per input); else greedy. ``length_penalty`` is GNMT's
    alpha (``arelu translate``'s, 0: raw scores; never read from the generation config,
    whose ``length_penalty`` is another formula's). ``renormalize`` defaults to what
    ``use_transform`` was given. Options left None come from ``generation_config`` (default:
    ``model.generation_config``), as in ``transformers``.
    """
    if unsupported:
        raise TypeError(f"arelu's generate does not take {', '.join(sorted(unsupported))}; it "
                        "takes input_ids, attention_mask, max_new_tokens, max_length, "
                        "num_beams, num_return_sequences, length_penalty, do_sample, "
                        "renormalize, eos_token_id, pad_token_id, generator, "
                        "return_dict_in_generate, generation_config")
    config = self.generation_config if generation_config is None else generation_config
    do_sample, num_beams, num_return_sequences, max_new_tokens, max_length = _from_config(
        config, do_sample, num_beams, num_return_sequences, max_new_tokens, max_length)
    src = inputs if inputs is not None else input_ids
    if src is None or src.dim() != 2:
        raise ValueError("generate needs input_ids of shape (batch, length)")
    mask = torch.ones_like(src) if attention_mask is None else attention_mask
    _check_left_padded(self, mask)
    search, bos, prefix = _search(self, src, mask, config)
    if max_new_tokens is None:
        max_new_tokens = 20 if max_length is None else max_length - prefix.shape[1]
    if max_new_tokens < 1 or num_beams < 1 or num_return_sequences < 1:
        raise ValueError("max_new_tokens (max_length beyond the prompt), num_beams and "
                         "num_return_sequences must be >= 1")
    if not do_sample and num_return_sequences > num_beams:
        raise ValueError(f"num_return_sequences ({num_return_sequences}) must be at most "
                         f"num_beams ({num_beams}) without do_sample")
    eos = _special(self, eos_token_id, "eos_token_id", config)
    eos = -1 if eos is None else eos                   # no eos: every row runs to the limit
    pad = _special(self, pad_token_id, "pad_token_id", config)
    pad = (0 if eos < 0 else eos) if pad is None else pad
    with _eval_mode(self):
        hyps = _hypotheses(search, src, self.arelu_transform, bos=bos, eos=eos,
                           max_new_tokens=max_new_tokens, num_beams=num_beams,
                           n=num_return_sequences, length_penalty=length_penalty,
                           do_sample=do_sample, generator=generator,
                           renormalize=self.arelu_renormalize if renormalize is None
                           else renormalize)
    out = pack_hypotheses(prefix, hyps, eos, pad)
    return out if return_dict_in_generate else out.sequences
