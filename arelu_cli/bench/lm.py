"""Time per generated token of trained language models (``arelu bench lm-study``):
part 1's sampling-speed ratios (:mod:`arelu_cli.bench.generate`) on real models.

For each model x decoding, at batch ``B``, two measures:

* **full model**: ``N`` incremental decoding steps as ``lm-eval`` generates
  (:func:`arelu_cli.decode.generate.sample_batch`): ``model.step`` with its key/value cache, then
  :func:`arelu_cli.decode.sampling.next_tokens`, each step's tokens fed back. The context
  (``[eos] + prompt``, the study's test prompts) is fed untimed first, and a timing never
  stops at an end-of-sentence token (it is fed back like any other), so every timing is
  ``B x N`` new tokens of every decoding at the same positions; ``sample_batch``'s per-row
  stop bookkeeping (the same for every decoding) is left out. ``ms_per_token`` is the time
  over ``B x N``;
* **output layer alone** (``head_*``): the same ``N`` steps of ``hidden @ W.T + b`` and
  ``next_tokens`` (:func:`arelu_cli.bench.generate.step_loop`) on the model's own
  final hidden states of one generation of that decoding.

Every loop of one batch size (all models, all decodings, both measures) is timed once per
repeat in an order rotated from repeat to repeat
(:func:`~arelu_cli.bench.generate.interleaved`); times are medians over repeats, and
a ratio is the median over repeats of a row's time over the baseline's in the same repeat
(``ratio_to_softmax_sample``: the softmax model's pure ``sample``; ``ratio_to_softmax_top_p``:
its nucleus sampling). Which models and decodings: :mod:`arelu_cli.studies.lm.bench`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from arelu_cli.bench.generate import interleaved, paired, step_loop, support
from arelu_cli.decode.translate import Decoder
from arelu_cli.model.lm import LanguageModel
from arelu_cli.decode.sampling import Decoding, next_tokens
from arelu_cli.util.signatures import machine


@dataclass(frozen=True)
class Timed:
    """One model x decoding to time: ``label`` names the decoding in the rows (the study's
    name, e.g. ``sample-tau_dev``, whose shift is in ``decoding``)."""

    decoder: Decoder
    label: str
    decoding: Decoding
    seed: int
    """The training seed of the model."""

    @property
    def key(self) -> tuple[str, str]:
        return self.decoder.transform.name, self.label


def contexts(prompts: Sequence[Sequence[int]], batch: int, eos_id: int) -> torch.Tensor:
    """``(B, P + 1)``: ``[eos] + prompt`` for the first ``batch`` prompts (cycled when there
    are fewer), which must all have ``P`` tokens."""
    if len({len(p) for p in prompts}) != 1:
        raise ValueError("the prompts must all have the same number of tokens")
    chosen = [prompts[i % len(prompts)] for i in range(batch)]
    return torch.tensor([[eos_id, *p] for p in chosen], dtype=torch.int64)


@torch.no_grad()
def prefill(model: LanguageModel, context: torch.Tensor):
    """The state after every context token but the last, and that last token ``(B,)``: the
    untimed start of a timing."""
    state = model.start()
    for position in range(context.shape[1] - 1):
        model.step(context[:, position], state)
    return state, context[:, -1]


@torch.no_grad()
def decode_steps(model: LanguageModel, started, timed: Timed, generator: torch.Generator,
                 steps: int) -> torch.Tensor:
    """``(B, steps)``: the new tokens of ``steps`` incremental steps from a :func:`prefill`
    state, each step's tokens fed back (module docstring)."""
    state, current = started
    chosen = []
    for _ in range(steps):
        current = next_tokens(model.step(current, state), timed.decoder.transform,
                              timed.decoding, generator)
        chosen.append(current)
    return torch.stack(chosen, 1)


@torch.no_grad()
def hidden_states(timed: Timed, context: torch.Tensor, steps: int, seed: int) -> torch.Tensor:
    """``(steps, B, d)``: the final normed states from which one generation of ``timed``
    chose its new tokens (teacher-forced on that generation: the states of the steps)."""
    model = timed.decoder.model
    generator = torch.Generator(device=context.device).manual_seed(seed)
    new = decode_steps(model, prefill(model, context), timed, generator, steps)
    tokens = torch.cat([context, new], 1)[:, :-1]            # (B, P + steps)
    return model.features(tokens)[:, context.shape[1] - 1:].transpose(0, 1).contiguous()


def full_loop(timed: Timed, context: torch.Tensor, steps: int, seed: int
              ) -> tuple[Callable, Callable]:
    """``(run, setup)``: ``run(setup())`` decodes ``steps`` steps of the whole model."""
    model = timed.decoder.model
    generator = torch.Generator(device=context.device)

    def run(started) -> None:
        generator.manual_seed(seed)
        decode_steps(model, started, timed, generator, steps)
    return run, lambda: prefill(model, context)


@dataclass(frozen=True)
class Measure:
    """What one batch size's timing is: ``steps`` new tokens per row, ``repeats`` repeats, and
    the baselines of the ratios (model transform, decoding label)."""

    steps: int
    repeats: int
    seed: int
    sample: tuple[str, str] = ("softmax", "sample")
    top_p: tuple[str, str] = ("softmax", "sample-top_p0.9")


def _ratios(times: dict, key: str, base: tuple[str, str], prefix: str) -> float | None:
    name = f"{prefix}{base[0]}:{base[1]}"
    return paired(times[f"{prefix}{key}"], times[name]) if name in times else None


def batch_rows(models: Sequence[Timed], prompts: Sequence[Sequence[int]], batch: int,
               measure: Measure, log=None) -> list[dict]:
    """The rows of one batch size: every model x decoding, full model and output layer
    alone, interleaved (module docstring). ``prompts`` are token ids of every model's
    vocabulary (they share it)."""
    device = models[0].decoder.device
    loops, setups, hidden = {}, {}, {}
    for timed in models:
        key = ":".join(timed.key)
        context = contexts(prompts, batch, timed.decoder.data.eos_id).to(device)
        loops[key], setups[key] = full_loop(timed, context, measure.steps, measure.seed)
        hidden[key] = hidden_states(timed, context, measure.steps, measure.seed)
        output = timed.decoder.model.output
        loops[f"head:{key}"] = step_loop(hidden[key], output.weight, output.bias,
                                         timed.decoder.transform, timed.decoding, measure.seed)
    times, other_cpu = interleaved(loops, measure.repeats, device,
                                   log and (lambda m: log(f"B={batch}: {m}")), setups)
    tokens = measure.steps * batch
    rows = []
    for timed in models:
        key, d, t = ":".join(timed.key), timed.decoder, timed.decoder.transform
        full, head = times[key], times[f"head:{key}"]
        logits = torch.nn.functional.linear(hidden[key].flatten(0, 1), d.model.output.weight,
                                            d.model.output.bias)
        row = {"transform": t.name, "decoding": timed.label, "tau_shift": timed.decoding.tau_shift,
               "alpha": t.alpha, "tau": t.tau, "seed": timed.seed, "checkpoint": str(d.path),
               "v": d.data.vocab_size, "d": d.config.model.d_model,
               "layers": d.config.model.decoder_layers, "batch": batch,
               "new_tokens": measure.steps, "prefix_tokens": len(prompts[0]),
               "repeats": measure.repeats, "ms_per_token": statistics.median(full) / tokens,
               "ms_per_step": statistics.median(full) / measure.steps,
               "head_ms_per_token": statistics.median(head) / tokens,
               "head_share": paired(head, full)}
        for prefix, column in (("", ""), ("head:", "head_")):
            row[f"{column}ratio_to_softmax_sample"] = _ratios(times, key, measure.sample, prefix)
            row[f"{column}ratio_to_softmax_top_p"] = _ratios(times, key, measure.top_p, prefix)
        row |= {"support": support(logits, t, timed.decoding), "device": str(device),
                "machine": machine(device), "threads": torch.get_num_threads(),
                "other_cpu": other_cpu, "ms_all": " ".join(f"{x:.4g}" for x in full),
                "head_ms_all": " ".join(f"{x:.4g}" for x in head),
                "signature": d.signature(decoding=timed.decoding.label(), seed=timed.seed,
                                         bench="lm", batch=batch, new_tokens=measure.steps,
                                         prefix_tokens=len(prompts[0]), split="test",
                                         repeats=measure.repeats, device=str(device),
                                         threads=torch.get_num_threads())}
        rows.append(row)
    return rows


def print_table(rows: Sequence[dict], console) -> None:
    """The rows on a rich ``console``: ms per token and paired ratios, full model and head."""
    from rich.table import Table

    def ratio(value) -> str:
        return "" if value is None or value != value else f"{value:.2f}"

    table = Table(title="ms per generated token (full model; output layer alone)")
    for col in ("transform", "decoding", "B", "support", "ms/token", "x sample", "x top-p",
                "head ms/token", "x sample", "x top-p"):
        table.add_column(col, justify="left" if col in ("transform", "decoding") else "right")
    for r in rows:
        table.add_row(r["transform"], r["decoding"], str(r["batch"]), f"{r['support']:.0f}",
                      f"{r['ms_per_token']:.4g}", ratio(r["ratio_to_softmax_sample"]),
                      ratio(r["ratio_to_softmax_top_p"]), f"{r['head_ms_per_token']:.4g}",
                      ratio(r["head_ratio_to_softmax_sample"]),
                      ratio(r["head_ratio_to_softmax_top_p"]))
    console.print(table)
