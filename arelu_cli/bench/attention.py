"""Training-step time of each attention configuration (beyond the paper; the attention
study, :mod:`arelu_cli.studies.attention.study`).

As :mod:`arelu_cli.bench.train` times output transforms, this times attention
transforms: every configuration gets a model initialized from the same seed with its own
``[model]`` attention keys, the same batch (the recipe's first training batch) and the same
output transform and loss (``[train] transform``, its tau resolved on that model as the trainer
does); one timed call is a whole optimizer step (:func:`bench_train.step_fn`), timed alternately
against the baseline configuration in the same process
(:func:`arelu_cli.bench.timing.time_pair`), so machine noise hits both alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch
from rich.console import Console

from arelu_cli.train.precision import autocast as precision_autocast, resolve
from arelu_cli.bench import timing
from arelu_cli.bench.train import step_fn
from arelu_cli.config import Config, ModelConfig
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.device import pick_device
from arelu_cli.model.transformer import Transformer
from arelu_cli.model.output_stats import first_batch, resolve_tau
from arelu_cli.registry import get_transform
from arelu_cli.util.signatures import machine, signature


@timing.frozen_heap()
def bench_attention(config: Config, models: Mapping[str, ModelConfig], baseline: str,
                    repeats: int, device_name: str = "auto", warmup: int = 2,
                    console: Console | None = None) -> list[dict]:
    """One row per configuration of ``models`` (label -> ``[model]`` table): ms per step,
    tokens/s, the ratio to ``baseline``'s step (paired), peak extra memory."""
    if repeats < 1:
        raise UserError(f"bench repeats must be >= 1, got {repeats}")
    if baseline not in models:
        raise UserError(f"the baseline attention {baseline!r} is not among {list(models)}")
    device = pick_device(device_name)
    data = load_prepared(config.data.path)
    batch = first_batch(data, config.data.max_tokens, config.train.seed).to(device)
    tokens = int((batch.src != data.pad_id).sum()) + batch.n_tgt_tokens
    bf16 = resolve(config.train.precision, device) == "bf16"
    autocast = precision_autocast(config.train.precision, device)
    steps, taus = {}, {}
    for label, model_cfg in models.items():
        torch.manual_seed(config.train.seed)
        model = Transformer(model_cfg, data.src_vocab_size, data.tgt_vocab_size,
                            data.pad_id).to(device)
        taus[label] = resolve_tau(config.train.tau, get_transform(config.train.transform), model,
                                  data, config.data.max_tokens, config.train.seed)
        transform = get_transform(config.train.transform, tau=taus[label] or 0.0)
        steps[label] = step_fn(model, transform, batch, autocast, config.train, False)
    rows = []
    for label, step in steps.items():
        if console:
            console.log(f"timing attention {label}")
        with timing.OtherLoad() as load:
            pair = timing.time_pair(step, steps[baseline], lambda: None, device, repeats, warmup)
        if label == baseline:  # timed against itself: one step time, the ratio 1 by definition
            both = (pair.ms + pair.baseline_ms) / 2
            pair = dataclasses.replace(pair, ms=both, baseline_ms=both, ratio=1.0)
        peak = timing.peak_extra_bytes(step, lambda: None, device)
        m = models[label]
        rows.append({
            "variant": label, "attention": m.attention, "attention_relu": m.attention_relu,
            "transform": config.train.transform, "tau": taus[label],
            "ms_per_step": pair.ms, "baseline_ms_per_step": pair.baseline_ms,
            "time_ratio": pair.ratio, "tokens_per_s": tokens / pair.ms * 1e3,
            "speed_ratio": 1.0 / pair.ratio,
            "peak_extra_mib": None if peak is None else peak / 2**20,
            "baseline": baseline, "sentences": int(batch.src.shape[0]), "tokens": tokens,
            "device": str(device), "gpu": timing.device_label(device), "machine": machine(device),
            "precision": "bf16" if bf16 else "fp32", "threads": torch.get_num_threads(),
            "repeats": repeats, "other_cpu": load.cores,
            "signature": signature(transform=config.train.transform, tau=taus[label],
                                   attention=label, data=data.corpus, seed=config.train.seed,
                                   device=device.type,
                                   label_smoothing=config.train.label_smoothing or None),
        })
    return rows

