"""``model.generate`` after :func:`arelu_cli.hf.use_transform`: ``transformers``' own
generation where it is exact, arelu's beam search where it is not.

**Greedy search and sampling** (``num_beams=1``) are ``transformers``' ``generate`` with one
more logits processor, :class:`TransformLogitsProcessor`, which turns the logits into
``log p`` of the transform (:func:`arelu_cli.decode.sampling.log_probs`: ``-inf`` off the
support, alpha-ReLU divided by its sum, an empty alpha-ReLU support the arg-max token, as
``arelu generate`` samples). The processors compose in this order:

1. ``transformers``' processors of the raw logits, as the call and the generation config
   set them (sequence bias, repetition and no-repeat-n-gram penalties, bad words, minimum
   lengths, forced BOS/EOS tokens, suppressed tokens, ...), then the call's own
   ``logits_processor`` list;
2. the transform: ``log p``;
3. with ``do_sample``: ``transformers``' warpers on ``log p``: temperature (``log p / T``,
   i.e. ``p ^ (1 / T)`` over its sum, which is the temperature rule of
   :mod:`arelu_cli.decode.sampling`), then top-k, top-p, min-p, typical-p, epsilon / eta.

``transformers`` then samples ``multinomial(softmax(scores))``: exactly ``p`` after those
warpers, never a token that ``p`` gives probability 0; greedy takes the arg-max. Stopping
(eos ids, a list of them included; stop strings; ``max_time``), streamers,
``num_return_sequences``, ``use_cache``, ``output_scores`` (the processed ``log p``) and
``return_dict_in_generate`` are ``transformers``' own. A ``generator=`` seeds the draws
without touching the global random state.

**Beam search** (``num_beams > 1``) is arelu's own (:func:`arelu_cli.decode.search.beam_search`,
as ``arelu translate`` runs it, on the model's key/value cache: :mod:`arelu_cli.hf.search`):
``transformers``' adds ``log_softmax`` of the raw logits before any processor, and alpha-ReLU
with a fixed tau is not shift-invariant, so no processor could make its scores exact. A
hypothesis scores the sum of the transform's ``log_scores`` (``-inf`` where p = 0, so a
zero-probability token never enters a beam; ``renormalize=True`` divides alpha-ReLU by its
sum per step), finished ones rank by GNMT's ``score / ((5 + len) / 6) ** length_penalty``
(``length_penalty`` from the call only: the generation config's is another formula's). The
processors of step 1 run in it too (a forced token has probability 1); sampling options are
ignored there, as ``transformers`` ignores them without ``do_sample``; what it cannot do is
refused with the reason (:data:`BEAM_REFUSED`). Its ``return_dict_in_generate`` is a
:class:`SearchOutput`: each row's score and whether it ended with eos.

Every path refuses an empty prompt and a right-padded one (the next token would follow a
pad), and runs the model in eval mode (restored afterwards).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation.configuration_utils import GenerationMode

from arelu_cli.decode.sampling import log_probs
from arelu_cli.decode.search import Hypothesis, beam_search
from arelu_cli.hf.search import CausalSearch, Seq2SeqSearch
from arelu_cli.registry import OutputTransform

# Why arelu's beam search refuses an option (a non-neutral config value or a call argument).
_ROWS = "its processor assumes transformers' rows (batch x num_beams), not arelu's beams"
BEAM_REFUSED = {
    "output_scores": "arelu's beam search returns each hypothesis' total score "
                     "(sequences_scores), not per-step scores",
    "output_logits": "arelu's beam search keeps no per-step logits",
    "output_attentions": "arelu's beam search keeps no attentions",
    "output_hidden_states": "arelu's beam search keeps no hidden states",
    "stop_strings": "arelu's beam search stops at eos and the length limit only",
    "max_time": "arelu's beam search stops at eos and the length limit only",
    "encoder_repetition_penalty": _ROWS,
    "encoder_no_repeat_ngram_size": _ROWS,
    "guidance_scale": "classifier-free guidance needs a second, unconditional pass",
    "watermarking_config": "a watermark acts on sampled scores",
    "streamer": "transformers' beam search takes no streamer either",
    "stopping_criteria": "arelu's beam search stops at eos and the length limit only",
    "prefix_allowed_tokens_fn": _ROWS,
    "logits_processor": _ROWS,
    "negative_prompt_ids": "classifier-free guidance needs a second, unconditional pass",
    "assistant_model": "assisted generation drafts greedy or sampled tokens",
}
"""Options arelu's beam search refuses, with the reason."""
_NEUTRAL = {"output_scores": (None, False), "output_logits": (None, False),
            "output_attentions": (None, False), "output_hidden_states": (None, False),
            "stop_strings": (None,), "max_time": (None,),
            "encoder_repetition_penalty": (None, 1.0),
            "encoder_no_repeat_ngram_size": (None, 0), "guidance_scale": (None, 1.0),
            "watermarking_config": (None,)}
_BEAM_INPUTS = ("input_ids", "attention_mask", "use_cache", "tokenizer", "synced_gpus")
_MODES = {
    GenerationMode.BEAM_SAMPLE: "beam sampling (do_sample with num_beams > 1) is not "
                                "implemented: sample with num_beams=1 or search with "
                                "do_sample=False",
    GenerationMode.ASSISTED_GENERATION: "assisted generation is not implemented with an "
                                        "arelu transform: drop assistant_model / "
                                        "prompt_lookup_num_tokens",
}


class TransformLogitsProcessor(LogitsProcessor):
    """Logits ``(B, V)`` -> ``log p`` of the transform (module docstring)."""

    def __init__(self, transform: OutputTransform):
        self.transform = transform

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        return log_probs(scores, self.transform).to(scores.dtype)


@dataclass(frozen=True)
class SearchOutput:
    sequences: torch.Tensor
    """(B * n, L) as ``generate()`` returns them."""
    sequences_scores: torch.Tensor
    """(B * n,) float64 sums of the transform's log scores (eos included; not divided by
    the length penalty)."""
    ended: torch.Tensor
    """(B * n,) whether the row ended with eos (False: it reached the length limit)."""


@contextmanager
def _eval_mode(model: torch.nn.Module):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextmanager
def _seeded(generator: torch.Generator | None):
    """The global random state seeded from ``generator`` (transformers samples with it),
    restored afterwards; nothing without one."""
    if generator is None:
        yield
        return
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


def _check_inputs(model, src: torch.Tensor | None, mask: torch.Tensor | None) -> None:
    if src is None:
        return
    if not torch.is_tensor(src) or src.dim() != 2:
        raise ValueError("generate needs input_ids of shape (batch, length)")
    if src.shape[1] == 0:
        what = "source" if model.config.is_encoder_decoder else "prompt"
        raise ValueError(f"the {what} is empty (input_ids of shape {tuple(src.shape)}): give "
                         "at least one token, e.g. the tokenizer's bos_token_id")
    if (mask is not None and not model.config.is_encoder_decoder
            and bool((mask[:, -1] == 0).any())):
        raise ValueError("a prompt is right-padded (attention_mask is 0 at its last position), "
                         "so the next token would follow a pad; set tokenizer.padding_side = "
                         "'left'")


def _ids(value) -> list[int]:
    if value is None:
        return []
    if torch.is_tensor(value):
        return [int(v) for v in value.reshape(-1).tolist()]
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def pack_hypotheses(prefix: torch.Tensor, hyps: list[list[Hypothesis]], eos_id: int,
                    pad_id: int) -> SearchOutput:
    """Rows ``prefix[b] + tokens (+ its eos)`` of every hypothesis, right-padded with
    ``pad_id``; ``eos_id`` for hypotheses that do not name their eos."""
    rows, scores, ended = [], [], []
    for b, group in enumerate(hyps):
        for h in group:
            end = [eos_id if h.eos is None else h.eos] if h.ended else []
            rows.append(prefix[b].tolist() + h.tokens + end)
            scores.append(h.score)
            ended.append(h.ended)
    width = max(len(r) for r in rows)
    sequences = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        sequences[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return SearchOutput(sequences.to(prefix.device), torch.tensor(scores, dtype=torch.float64),
                        torch.tensor(ended))


def _refuse_beam_options(config, kwargs: dict, logits_processor) -> None:
    given = [f"{name}={getattr(config, name)!r}" for name, neutral in _NEUTRAL.items()
             if getattr(config, name, None) not in neutral]
    given += [name for name in BEAM_REFUSED if name not in _NEUTRAL
              and (kwargs.get(name) is not None or (name == "logits_processor"
                                                    and logits_processor))]
    if given:
        why = "; ".join(sorted({BEAM_REFUSED[g.split("=")[0]] for g in given}))
        raise ValueError(f"arelu's beam search does not take {', '.join(given)} ({why}); "
                         "drop them, or use num_beams=1 (transformers' greedy search or "
                         "sampling with the transform)")
    other = sorted(k for k in kwargs if k not in _BEAM_INPUTS and k not in BEAM_REFUSED
                   and not hasattr(config, k) and kwargs[k] is not None)
    if other:
        raise ValueError(f"arelu's beam search takes input_ids and attention_mask as model "
                         f"inputs, not {', '.join(other)}")


def raw_processors(model, config, src: torch.Tensor, prefix: int, eos: list[int],
                    max_new_tokens: int) -> LogitsProcessorList:
    """``transformers``' processors of the raw logits (step 1 of the module docstring), as
    its own ``generate`` builds them for a search without sampling."""
    config = copy.deepcopy(config)
    config.do_sample, config.renormalize_logits = False, False
    config.max_length = prefix + max_new_tokens
    config._eos_token_tensor = torch.tensor(eos, device=src.device) if eos else None
    return model._get_logits_processor(generation_config=config, input_ids_seq_length=prefix,
                                       encoder_input_ids=src, device=src.device,
                                       model_kwargs=None)


@torch.no_grad()
def _beam(model, src: torch.Tensor, mask: torch.Tensor, config, *, length_penalty: float,
          renormalize: bool):
    """arelu's beam search on ``src`` (module docstring)."""
    seq2seq = model.config.is_encoder_decoder
    if seq2seq:
        start = (_ids(config.decoder_start_token_id) or _ids(model.config.decoder_start_token_id)
                 or _ids(config.bos_token_id))                # transformers' fallback
        if not start:
            raise ValueError("the model's config has no decoder_start_token_id nor "
                             "bos_token_id")
        prefix = torch.full((len(src), 1), start[0], dtype=torch.long, device=src.device)
    else:
        start, prefix = [0], src                              # the first step ignores it
    beams, n = int(config.num_beams), int(config.num_return_sequences or 1)
    max_new = (config.max_new_tokens if config.max_new_tokens is not None
               else config.max_length - prefix.shape[1])
    if max_new < 1 or n < 1:
        raise ValueError("max_new_tokens (max_length beyond the prompt) and "
                         "num_return_sequences must be >= 1")
    if n > beams:
        raise ValueError(f"num_return_sequences ({n}) must be at most num_beams ({beams})")
    eos = _ids(config.eos_token_id)
    pad = _ids(config.pad_token_id) or eos[:1] or [0]
    processors = raw_processors(model, config, src, prefix.shape[1], eos, max_new)
    search = (Seq2SeqSearch if seq2seq else CausalSearch)(model, mask, processors)
    limits = torch.full((len(src),), max_new, dtype=torch.long)
    hyps = beam_search(search, src, model.arelu_transform, bos_id=start[0], eos_id=eos or [-1],
                       limits=limits, beam=beams, n_best=n, length_penalty=length_penalty,
                       renormalize=renormalize)
    out = pack_hypotheses(prefix, hyps, eos[0] if eos else pad[0], pad[0])
    return out if config.return_dict_in_generate else out.sequences


def generate(self, inputs: torch.Tensor | None = None, generation_config=None,
             logits_processor=None, *, length_penalty: float = 0.0,
             renormalize: bool | None = None, generator: torch.Generator | None = None,
             **kwargs):
    """``model.generate`` after :func:`arelu_cli.hf.use_transform` (module docstring): the
    arguments of ``transformers``' ``generate``, and ``generator`` (seeds the draws),
    ``length_penalty`` (beam search: GNMT's alpha, 0: raw scores) and ``renormalize``
    (beam search: alpha-ReLU's scores over their sum; default: what ``use_transform`` was
    given)."""
    src = inputs if inputs is not None else kwargs.get("input_ids")
    mask = kwargs.get("attention_mask")
    _check_inputs(self, src, mask)
    config, _ = self._prepare_generation_config(generation_config, **kwargs)
    mode = config.get_generation_mode(kwargs.get("assistant_model"))
    with _eval_mode(self):
        if mode == GenerationMode.BEAM_SEARCH:
            _refuse_beam_options(config, kwargs, logits_processor)
            if src is None:
                raise ValueError("arelu's beam search needs input_ids")
            return _beam(self, src, torch.ones_like(src) if mask is None else mask, config,
                         length_penalty=length_penalty,
                         renormalize=self.arelu_renormalize if renormalize is None
                         else renormalize)
        if mode not in (GenerationMode.GREEDY_SEARCH, GenerationMode.SAMPLE):
            raise ValueError(_MODES.get(mode, f"{mode.value.replace('_', ' ')} is not "
                                              "implemented with an arelu transform"))
        processors = LogitsProcessorList([*(logits_processor or []),
                                          TransformLogitsProcessor(self.arelu_transform)])
        with _seeded(generator):
            return type(self).generate(self, inputs, generation_config=generation_config,
                                       logits_processor=processors, **kwargs)
