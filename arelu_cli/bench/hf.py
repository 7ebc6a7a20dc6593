"""``arelu bench hf``: one training step (forward + backward) of small Hugging Face causal
LMs of several families, their loss switched by :func:`arelu_cli.hf.use_transform`.

Each family (a model type of ``transformers``' causal LMs, ``--families``; Llama by
default) is built from its own default config at the plan's sizes
(:func:`arelu_cli.hf.families.sized_config`: hidden size d, 4 heads, MLPs 2d wide, its
layers, the vocabulary V). Rows per family and V, on the same weights and batch:

* ``softmax``: the model as transformers builds it (its own loss, the baseline);
* ``1.5-relu``: the alpha-ReLU loss of the logits (paper eq. sp_loss), tau the analytic
  estimate for V (Table 3's formula);
* ``1.5-relu+fused``: the fused output layer (``use_transform(..., fused=True)``), which
  never holds the ``tokens x V`` logits (a ``refused: ...`` row where the family's logits
  do not fuse, :func:`arelu_cli.hf.head.fused_head`);
* on CUDA, ``liger``: the model's forward up to its head's input plus Liger-Kernel's fused
  linear cross-entropy on it (the ``bench`` extra; a ``not installed`` row otherwise; a
  ``refused: ...`` row for a family that soft-caps its logits, which it is not given).

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
FAMILIES = ("llama",)
"""The default: one family, so that a GPU run takes well under a minute."""
SUGGESTED = ("llama", "qwen2", "qwen3", "gemma2", "mistral", "phi3", "gpt_neox", "granite",
             "cohere")
"""The families of the reference runs (docs/transformers.md)."""
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
    families: tuple[str, ...] = FAMILIES
    methods: tuple[str, ...] = METHODS
    seed: int = 0


def _check_families(families: tuple[str, ...]) -> tuple[str, ...]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    unknown = [f for f in families if f not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES]
    if unknown or not families:
        raise UserError(f"--families takes model types of transformers' causal LMs (e.g. "
                        f"{','.join(SUGGESTED)}), not {','.join(unknown) or 'nothing'}")
    return tuple(dict.fromkeys(families))


def make_plan(quick: bool = False, vocabs: tuple[int, ...] | None = None,
              d_model: int | None = None, layers: int | None = None, batch: int | None = None,
              seq: int | None = None, repeats: int | None = None, device: str = "auto",
              families: tuple[str, ...] | None = None) -> HFPlan:
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
    if values["d_model"] % 8:
        raise UserError(f"--d-model must be a multiple of 8 (4 attention heads of an even "
                        f"width), got {values['d_model']}")
    vocabs = vocabs or (QUICK_VOCABS if quick else VOCABS)
    if min(vocabs) < 8:
        raise UserError(f"--vocabs must be at least 8 tokens each, got {min(vocabs)}")
    methods = METHODS + (("liger",) if device == "cuda" else ())
    return HFPlan(vocabs=tuple(vocabs), device=device, methods=methods,
                  families=_check_families(tuple(families or FAMILIES)), **values)


def _model(plan: HFPlan, family: str, vocab: int):
    """The family's model at the plan's sizes, the same weights for every method."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from arelu_cli.hf.families import sized_config

    cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[family])
    config = sized_config(cls.config_class, plan.d_model, plan.layers, vocab,
                          positions=max(plan.seq, 64), eager=False)
    config.tie_word_embeddings = False
    torch.manual_seed(plan.seed)
    return cls(config).to(plan.device).train()


def _step(model, method: str):
    """``step(batch)``: one forward + backward of ``method`` on ``model``."""
    if method == "liger":
        from arelu_cli.hf.forward import head_input
        from arelu_cli.hf.head import fused_head, head_params
        from arelu_cli.hf.transform import output_layer

        loss_fn, scale = external_loss("liger"), fused_head(model).scale
        weight, _ = head_params(output_layer(model))

        def liger(ids):
            _, hidden = head_input(model, input_ids=ids, use_cache=False)
            target = torch.nn.functional.pad(ids, (0, 1), value=-100)[:, 1:]
            loss_fn(hidden.reshape(-1, hidden.shape[-1]) * scale, weight,
                    target.reshape(-1)).backward()
        return liger
    return lambda ids: model(input_ids=ids, labels=ids, use_cache=False).loss.backward()


def _models(plan: HFPlan, family: str, vocab: int) -> tuple[dict, dict, float]:
    """Each runnable method's model (transform applied), why the others cannot run, and
    alpha-ReLU's tau."""
    from arelu_cli.hf import use_transform
    from arelu_cli.hf.head import fused_head

    models, why, tau = {BASELINE: _model(plan, family, vocab)}, {}, None
    for method in plan.methods:
        if (status := unavailable(method, plan.device)) is not None:
            why[method] = status
            continue
        model = _model(plan, family, vocab)
        try:
            if method == "liger":
                if fused_head(model).softcap is not None:
                    raise ValueError(f"{type(model).__name__} soft-caps its logits; the liger "
                                     "row runs Liger-Kernel's loss without a cap")
            else:
                tau = use_transform(model, "1.5-relu", tau=tau,
                                    fused=method.endswith("+fused")).tau
        except ValueError as err:                      # the family's logits do not fuse
            why[method] = f"refused: {err}"
            continue
        models[method] = model
    return models, why, tau


def _rows(plan: HFPlan, family: str, vocab: int) -> list[dict]:
    device = torch.device(plan.device)
    models, why, tau = _models(plan, family, vocab)
    gen = torch.Generator().manual_seed(plan.seed)
    ids = torch.randint(3, vocab, (plan.batch, plan.seq), generator=gen).to(device)
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
    base_row = dict(family=family, vocab=vocab, tokens=plan.batch * plan.seq,
                    d_model=plan.d_model, layers=plan.layers, device=plan.device,
                    machine=machine(device), threads=torch.get_num_threads(),
                    tau=None if tau is None else round(tau, 5))
    rows = [dict(transform=BASELINE, status="ok", **base_row)]
    base_ms = []
    for name in plan.methods:
        row = dict(transform=name, **base_row)
        if name in why:
            rows.append(row | dict(status=why[name]))
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
                                     model=f"{family}-d{plan.d_model}-l{plan.layers}",
                                     device=plan.device, threads=torch.get_num_threads())
    return rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@timing.frozen_heap()
def run(plan: HFPlan, write) -> list[dict]:
    """Every family and vocabulary of ``plan``; ``write(rows)`` after each (the CSV grows
    as it goes)."""
    import transformers

    transformers.logging.set_verbosity_error()
    rows: list[dict] = []
    for family in plan.families:
        for vocab in plan.vocabs:
            rows += _rows(plan, family, vocab)
            write(rows)
    return rows


def print_table(rows: list[dict], console: Console) -> None:
    """Time and peak memory of each step against softmax's."""
    table = Table(title="HF training step: time and peak memory vs softmax")
    for col in ("family", "transform", "V", "ms", "x time", "MiB", "x memory"):
        table.add_column(col, justify="left" if col in ("family", "transform") else "right")
    show = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    for r in rows:
        if r["status"] != "ok":
            table.add_row(r["family"], r["transform"], str(r["vocab"]), "-",
                          r["status"][:60], "-", "-")
            continue
        table.add_row(r["family"], r["transform"], str(r["vocab"]), show(r["time_ms"]),
                      show(r["time_ratio"]), show(r["peak_mib"]), show(r["peak_mem_ratio"]))
    console.print(table)
