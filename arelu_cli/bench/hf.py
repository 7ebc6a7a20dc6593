"""``arelu bench hf``: one training step (forward + backward) of a small Llama-style
Hugging Face model, its loss switched by :func:`arelu_cli.hf.use_transform`.

Rows per vocabulary V (32K and 128K by default), on the same model weights and batch:

* ``softmax``: the model as transformers builds it (its own ``ForCausalLMLoss``, the
  baseline);
* ``1.5-relu``: the alpha-ReLU loss of the logits (paper eq. sp_loss), tau the analytic
  estimate for V (Table 3's formula);
* ``1.5-relu+fused``: the fused output layer (``use_transform(..., fused=True)``), which
  never holds the ``tokens x V`` logits;
* on CUDA, ``liger``: the base model plus Liger-Kernel's fused linear cross-entropy on its
  last hidden states (the ``bench`` extra; a ``not installed`` row otherwise).

Each is timed alternately with the softmax step in the same process (the median of
per-pair ratios is ``time_ratio``), and its peak memory beyond the model, its gradients and
the batch is measured alone (``peak_mem_ratio`` = its peak over softmax's; on CPU the
process's peak resident set, on CUDA the allocator's), as the other ``arelu bench``
commands do (:mod:`arelu_cli.bench.timing`). ``other_cpu`` says how busy the machine was.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from rich.console import Console
from rich.table import Table

from arelu_cli.bench import timing
from arelu_cli.bench.fused import external_loss, unavailable
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import machine, signature

VOCABS = (32768, 131072)
QUICK_VOCABS = (1000, 4000)
METHODS = ("1.5-relu", "1.5-relu+fused")
BASELINE = "softmax"


@dataclass(frozen=True)
class HFPlan:
    vocabs: tuple[int, ...]
    d_model: int
    layers: int
    batch: int
    seq: int
    repeats: int
    device: str
    methods: tuple[str, ...] = METHODS
    seed: int = 0


def make_plan(quick: bool = False, vocabs: tuple[int, ...] | None = None,
              d_model: int | None = None, layers: int | None = None, batch: int | None = None,
              seq: int | None = None, repeats: int | None = None,
              device: str = "auto") -> HFPlan:
    """Resolve the command-line options; bad values raise :class:`UserError`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise UserError(f"--device must be cpu, cuda or auto (and cuda needs a GPU), got {device!r}")
    given = dict(d_model=d_model, layers=layers, batch=batch, seq=seq, repeats=repeats)
    defaults = (dict(d_model=32, layers=1, batch=2, seq=16, repeats=1) if quick else
                dict(d_model=256, layers=2, batch=4, seq=256, repeats=3))
    values = {k: defaults[k] if v is None else int(v) for k, v in given.items()}
    for name, value in values.items():
        if value < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if values["d_model"] % 4:
        raise UserError(f"--d-model must be a multiple of the 4 attention heads, got "
                        f"{values['d_model']}")
    vocabs = vocabs or (QUICK_VOCABS if quick else VOCABS)
    if min(vocabs) < 8:
        raise UserError(f"--vocabs must be at least 8 tokens each, got {min(vocabs)}")
    methods = METHODS + (("liger",) if device == "cuda" else ())
    return HFPlan(vocabs=tuple(vocabs), device=device, methods=methods, **values)


def _model(plan: HFPlan, vocab: int):
    """The small Llama-style model, the same weights for every method of a vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(plan.seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=plan.d_model,
                         intermediate_size=plan.d_model * 8 // 3, num_hidden_layers=plan.layers,
                         num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=max(plan.seq, 64), tie_word_embeddings=False)
    return LlamaForCausalLM(config).to(plan.device).train()


def _step(model, method: str):
    """``step(batch)``: one forward + backward of ``method`` on ``model``."""
    if method == "liger":
        loss_fn = external_loss("liger")

        def liger(ids):
            hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
            target = torch.nn.functional.pad(ids, (0, 1), value=-100)[:, 1:]
            loss_fn(hidden.reshape(-1, hidden.shape[-1]), model.lm_head.weight,
                    target.reshape(-1)).backward()
        return liger
    return lambda ids: model(input_ids=ids, labels=ids, use_cache=False).loss.backward()


def _models(plan: HFPlan, vocab: int) -> tuple[dict, float]:
    """Each runnable method's model (transform applied), and alpha-ReLU's tau."""
    from arelu_cli.hf import use_transform

    models = {BASELINE: _model(plan, vocab)}
    tau = None
    for method in plan.methods:
        if unavailable(method, plan.device) is not None:
            continue
        models[method] = model = _model(plan, vocab)
        if method != "liger":
            tau = use_transform(model, "1.5-relu", tau=tau,
                                fused=method.endswith("+fused")).tau
    return models, tau


def _vocab_rows(plan: HFPlan, vocab: int) -> list[dict]:
    device = torch.device(plan.device)
    models, tau = _models(plan, vocab)
    gen = torch.Generator().manual_seed(plan.seed)
    ids = torch.randint(0, vocab, (plan.batch, plan.seq), generator=gen).to(device)
    steps = {name: _step(model, name) for name, model in models.items()}
    for step in steps.values():                    # warm-up; gradients allocated once
        step(ids)
    setup = lambda: ids  # noqa: E731

    def measured(name):
        def run(batch):
            models[name].zero_grad(set_to_none=False)
            steps[name](batch)
        return run
    peaks = {name: timing.peak_extra_bytes(measured(name), setup, device) for name in steps}
    base_row = dict(vocab=vocab, tokens=plan.batch * plan.seq, d_model=plan.d_model,
                    layers=plan.layers, device=plan.device, machine=machine(device),
                    threads=torch.get_num_threads(), tau=round(tau, 5))
    rows = [dict(transform=BASELINE, status="ok", **base_row)]
    base_ms = []
    for name in plan.methods:
        row = dict(transform=name, **base_row)
        if (status := unavailable(name, plan.device)) is not None:
            rows.append(row | dict(status=status))
            continue
        with timing.OtherLoad() as load:
            pair = timing.time_pair(measured(name), measured(BASELINE), setup, device,
                                    plan.repeats, warmup=0)
        base_ms.append(pair.baseline_ms)
        rows.append(row | dict(status="ok", time_ms=round(pair.ms, 1),
                               time_ratio=round(pair.ratio, 3), other_cpu=_round(load.cores)))
    loads = [r["other_cpu"] for r in rows if r.get("other_cpu") is not None]
    rows[0] |= dict(time_ms=round(statistics.median(base_ms), 1) if base_ms else None,
                    time_ratio=1.0, other_cpu=max(loads, default=None))
    for row in rows:
        peak = peaks.get(row["transform"])
        row["peak_mib"] = None if peak is None else round(peak / 2**20, 1)
        row["peak_mem_ratio"] = (None if peak is None or not peaks[BASELINE]
                                 else round(peak / peaks[BASELINE], 3))
        row["signature"] = signature(transform=row["transform"], tau=tau, seed=plan.seed,
                                     data=f"randint{plan.batch}x{plan.seq}", vocab=vocab,
                                     model=f"llama-d{plan.d_model}-l{plan.layers}",
                                     device=plan.device, threads=torch.get_num_threads())
    return rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def run(plan: HFPlan, write) -> list[dict]:
    """Every vocabulary of ``plan``; ``write(rows)`` after each (the CSV grows as it goes)."""
    rows: list[dict] = []
    for vocab in plan.vocabs:
        rows += _vocab_rows(plan, vocab)
        write(rows)
    return rows


def print_table(rows: list[dict], console: Console) -> None:
    """Time and peak memory of each step against softmax's."""
    table = Table(title="HF Llama-style training step: time and peak memory vs softmax")
    for col in ("transform", "V", "ms", "x time", "MiB", "x memory"):
        table.add_column(col, justify="left" if col == "transform" else "right")
    show = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    for r in rows:
        if r["status"] != "ok":
            table.add_row(r["transform"], str(r["vocab"]), "-", r["status"], "-", "-")
            continue
        table.add_row(r["transform"], str(r["vocab"]), show(r["time_ms"]), show(r["time_ratio"]),
                      show(r["peak_mib"]), show(r["peak_mem_ratio"]))
    console.print(table)
