"""``arelu bench train``: training-step speed and memory of each output transform.

The paper's speed claim (Appendix, training hours): 1.5-ReLU trains about as fast as
softmax (0.85-1.07x its time) while 1.5-entmax takes 1.7-2.7x. Here every transform gets
a copy of the same freshly initialized model and the same batch (the recipe's first
training batch); one timed call is a whole optimizer step (forward, the transform's loss as
the trainer computes it, ``[train] label_smoothing`` included -- or, per transform, the label
smoothing it trains with, as ``arelu study`` times each transform at its selected
configuration -- backward with alpha-ReLU's ``reuse_logits``, Adam), timed alternately
against softmax in the same process (:func:`arelu_cli.bench.timing.time_pair`), so machine noise hits
both alike (on CUDA: CUDA events, ``torch.cuda.max_memory_allocated``, and the GPU's
name in a column and, through the CLI, in the file name). Peak memory is the step's extra
memory beyond the model and optimizer. With ``fused``, each alpha-ReLU transform gets a
second row, ``<name>+fused``: the same step with the output projection fused into the loss
(``[train] fused_output``, :class:`arelu_cli.model.fused_output.FusedOutputLoss`), which never
holds the N x V logits.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

import pandas as pd
import torch
from rich.console import Console
from rich.table import Table

from arelu_cli.train.precision import autocast as precision_autocast, resolve
from arelu_cli.bench import timing
from arelu_cli.config import Config, TrainConfig
from arelu_cli.data.prepared import load_prepared
from arelu_cli.model.device import pick_device
from arelu_cli.util.errors import UserError
from arelu_cli.model.fused_output import FusedOutputLoss
from arelu_cli.model.lm import build_model
from arelu_cli.model.transformer import TokenModel
from arelu_cli.model.output_stats import first_batch, resolve_tau
from arelu_cli.registry import PAPER_TRANSFORMS, get_transform
from arelu_cli.util.signatures import machine, signature
from arelu_cli.transforms.checks import check_label_smoothing
from arelu_cli.train.schedule import adam, noam_lr

BASELINE = "softmax"
DEFAULT_TRANSFORMS = PAPER_TRANSFORMS


def step_fn(model: TokenModel, transform, batch, autocast, t: TrainConfig, fused: bool):
    """A closure doing one optimizer step of ``model`` on ``batch`` (Adam at the first
    step's learning rate), as the trainer does it (``fused``: with ``fused_output``)."""
    optimizer = adam(model.parameters(), t, noam_lr(1, t.lr, model.cfg.d_model, t.warmup))
    keep = batch.tgt_out != batch.pad_id
    target = batch.tgt_out[keep]
    fused_loss = FusedOutputLoss(model, transform, t.label_smoothing) if fused else None

    def step(_state: object) -> None:
        with autocast():
            if fused_loss is not None:
                loss, _ = fused_loss(*batch.inputs, keep, target)
            else:
                logits = model(*batch.inputs, keep)  # (N, V)
        if fused_loss is None:
            # fp32 only for the losses that need it, as the trainer does (no N x V copy for
            # alpha-ReLU, whose loss reads bf16 with fp32 math); per-token losses summed in
            # fp32, to the recipe's smoothed target: the trainer's loss, not a cheaper one
            loss = transform.loss(transform.loss_input(logits), target, reduction="none",
                                  reuse_logits=True, label_smoothing=t.label_smoothing
                                  ).sum(dtype=torch.float32)
        (loss / target.numel()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def _smoothing(config: Config, names: list[str],
               given: Mapping[str, float] | None) -> dict[str, float]:
    """The label smoothing of each transform's step: ``given``, else the recipe's."""
    smoothing = {name: config.train.label_smoothing for name in names}
    for name, eps in (given or {}).items():
        try:
            check_label_smoothing(eps)
        except ValueError:
            raise UserError(f"--label-smoothing must be in [0, 1) (0 is no smoothing); got "
                            f"{eps!r} for {name}") from None
        if name in smoothing:
            smoothing[name] = float(eps)
    return smoothing


@timing.frozen_heap()
def bench_train(config: Config, transforms: list[str], repeats: int, device_name: str,
                warmup: int = 2, console: Console | None = None, fused: bool = False,
                label_smoothing: Mapping[str, float] | None = None) -> list[dict]:
    """One row per transform (and, with ``fused``, one more per alpha-ReLU transform with the
    fused output layer): ms per step, tokens/s, the ratio to softmax, peak memory. Each
    transform's step uses its ``label_smoothing`` (by name; the recipe's for the others)."""
    if repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {repeats}")
    names = [BASELINE] + [n for n in transforms if n != BASELINE]
    for name in names:
        get_transform(name)  # validates every name before any timing
    smoothing = _smoothing(config, names, label_smoothing)
    device = pick_device(device_name)
    data = load_prepared(config.data.path)
    batch = first_batch(data, config.data.max_tokens, config.train.seed,
                        config.data.block_size).to(device)
    tokens = int((batch.src != data.pad_id).sum()) + batch.n_tgt_tokens
    torch.manual_seed(config.train.seed)
    initial = build_model(config, data.src_vocab_size, data.tgt_vocab_size, data.pad_id).to(device)
    bf16 = resolve(config.train.precision, device) == "bf16"
    autocast = precision_autocast(config.train.precision, device)
    steps = {}
    for name in names:
        tau = resolve_tau(config.train.tau, get_transform(name), initial, data,
                          config.data.max_tokens, config.train.seed, config.data.block_size)
        transform = get_transform(name, tau=tau or 0.0)
        train = dataclasses.replace(config.train, label_smoothing=smoothing[name])
        for with_fused in (False, True) if fused and transform.family == "relu" else (False,):
            steps[name + "+fused" * with_fused] = (transform, with_fused, train.label_smoothing,
                                                   step_fn(copy.deepcopy(initial), transform,
                                                            batch, autocast, train, with_fused))
    rows = []
    for label, (transform, with_fused, eps, step) in steps.items():
        if console:
            console.log(f"timing {label}")
        with timing.OtherLoad() as load:
            pair = timing.time_pair(step, steps[BASELINE][3], lambda: None, device, repeats,
                                    warmup)
        peak = timing.peak_extra_bytes(step, lambda: None, device)
        name = transform.name
        rows.append({
            "transform": name, "fused_output": with_fused, "alpha": transform.alpha,
            "tau": transform.tau, "label_smoothing": eps,
            "ms_per_step": pair.ms, "softmax_ms_per_step": pair.baseline_ms,
            "time_ratio": pair.ratio, "tokens_per_s": tokens / pair.ms * 1e3,
            "speed_ratio": 1.0 / pair.ratio, "peak_extra_mib": None if peak is None else peak / 2**20,
            "sentences": int(batch.src.shape[0]), "tokens": tokens, "vocab": data.vocab_size,
            "d_model": config.model.d_model, "device": str(device),
            "gpu": timing.device_label(device), "machine": machine(device),
            "precision": "bf16" if bf16 else "fp32", "threads": torch.get_num_threads(),
            "repeats": repeats, "other_cpu": load.cores,
            "signature": signature(transform=name, alpha=transform.alpha, tau=transform.tau,
                                   fused_output=with_fused or None,
                                   label_smoothing=eps or None, data=data.corpus,
                                   seed=config.train.seed, device=device.type),
        })
    return rows


def print_table(frame: pd.DataFrame, console: Console) -> None:
    table = Table(title="training step per transform (same model and batch; ratios vs softmax)")
    for col in ("transform", "ms/step", "tokens/s", "× softmax time", "× softmax speed", "peak MiB"):
        table.add_column(col, justify="right", no_wrap=col == "transform")
    for r in frame.to_dict("records"):
        peak = "-" if pd.isna(r["peak_extra_mib"]) else f"{r['peak_extra_mib']:,.0f}"
        label = r["transform"] + ("+fused" if r["fused_output"] else "")
        table.add_row(label, f"{r['ms_per_step']:.1f}", f"{r['tokens_per_s']:,.0f}",
                      f"{r['time_ratio']:.3f}", f"{r['speed_ratio']:.3f}", peak)
    console.print(table)

