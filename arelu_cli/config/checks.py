"""Checks of a :class:`~arelu_cli.config.schema.Config` whose values are well typed but
impossible (a head count that does not divide ``d_model``, a negative beam, NaN, fused output
with a normalizing transform...): each a one-line :class:`UserError` naming the key and what
to do. Standard library only.
"""

from __future__ import annotations

import dataclasses
import math

from arelu_cli.config.schema import SECTIONS, Config
from arelu_cli.util.errors import UserError


def _positive(where: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):  # an infinite lr trains to NaN
        raise UserError(f"{where} must be positive and finite, got {value}")


def _check_lm(config: Config) -> None:
    data, m = config.data, config.model
    _positive("[data] block_size", data.block_size)
    if data.task != "lm":
        return
    if data.block_size > m.max_positions:
        raise UserError(f"[data] block_size ({data.block_size}) is longer than [model] "
                        f"max_positions ({m.max_positions}); raise max_positions or lower it")
    if data.block_size > data.max_tokens:
        raise UserError(f"[data] block_size ({data.block_size}) is more than [data] max_tokens "
                        f"({data.max_tokens}), the tokens of a batch; raise max_tokens")


def check_config(config: Config) -> Config:
    """Check values that are well typed but impossible; return ``config`` unchanged."""
    m, t, d = config.model, config.train, config.decode
    for key in ("d_model", "encoder_layers", "decoder_layers", "heads", "d_ff", "max_positions"):
        if key == "encoder_layers" and config.data.task == "lm":  # no encoder: 0 says so
            if m.encoder_layers < 0:
                raise UserError(f"[model] encoder_layers must be >= 0 (a language model has no "
                                f"encoder and ignores it), got {m.encoder_layers}")
            continue
        _positive(f"[model] {key}", getattr(m, key))
    if m.d_model % m.heads:
        raise UserError(f"[model] heads ({m.heads}) must divide d_model ({m.d_model})")
    if m.d_model % 2:
        raise UserError(f"[model] d_model must be even for sinusoidal positions, got {m.d_model}")
    for key in ("dropout", "attention_dropout"):
        if not 0.0 <= getattr(m, key) < 1.0:
            raise UserError(f"[model] {key} must be in [0, 1), got {getattr(m, key)}")
    if not (math.isfinite(m.attention_eps) and m.attention_eps > 0):
        raise UserError(f"[model] attention_eps must be a finite number > 0, got "
                        f"{m.attention_eps}")
    for key in ("lr", "warmup", "accum", "max_steps", "log_every", "valid_every", "save_every",
                "stats_rows", "adam_eps"):
        _positive(f"[train] {key}", getattr(t, key))
    for key in ("adam_beta1", "adam_beta2", "average_decay"):
        if not 0.0 <= getattr(t, key) < 1.0:
            raise UserError(f"[train] {key} must be in [0, 1), got {getattr(t, key)}")
    if t.keep_every < 0:
        raise UserError(f"[train] keep_every must be >= 0 (0 keeps no snapshots), got {t.keep_every}")
    for key in ("max_minutes", "clip_norm"):
        if not (math.isfinite(getattr(t, key)) and getattr(t, key) >= 0):
            raise UserError(f"[train] {key} must be >= 0 (0 disables it), got {getattr(t, key)}")
    if isinstance(t.tau, str) and t.tau not in ("auto", "analytic"):
        raise UserError(f"[train] tau must be a number, 'auto' or 'analytic', got {t.tau!r}")
    if not isinstance(t.tau, str) and not math.isfinite(t.tau):
        raise UserError(f"[train] tau must be a finite number, 'auto' or 'analytic', got {t.tau}")
    if t.fused_output and not t.transform.strip().lower().endswith("-relu"):
        raise UserError(f"[train] fused_output works only with alpha-ReLU transforms (<a>-relu, "
                        f"e.g. 1.5-relu), not {t.transform!r}; set fused_output = false")
    if not 0.0 <= t.label_smoothing < 1.0:
        raise UserError(f"[train] label_smoothing must be in [0, 1) (0 disables it), got "
                        f"{t.label_smoothing}")
    if t.threads != "auto" and not (isinstance(t.threads, int) and t.threads >= 1):
        raise UserError(f"[train] threads must be 'auto' or a positive integer (torch's CPU "
                        f"threads), got {t.threads!r}")
    _positive("[data] max_tokens", config.data.max_tokens)
    _check_lm(config)
    _positive("[decode] max_length_ratio", d.max_length_ratio)
    _positive("[decode] max_tokens", d.max_tokens)
    if d.max_length_offset < 0:
        raise UserError(f"[decode] max_length_offset must be >= 0, got {d.max_length_offset}")
    if d.beam < 1:
        raise UserError(f"[decode] beam must be at least 1 (1 is greedy search), got {d.beam}")
    if not (math.isfinite(d.length_penalty) and d.length_penalty >= 0):
        raise UserError(f"[decode] length_penalty must be >= 0 (0 disables it), got "
                        f"{d.length_penalty}")
    r = config.reproduce
    if not r.transforms:
        raise UserError("[reproduce] transforms must name at least one output transform")
    _positive("[reproduce] sweep_steps", r.sweep_steps)
    _positive("[reproduce] timing_repeats", r.timing_repeats)
    if any(b < 1 for b in r.beams):
        raise UserError(f"[reproduce] beams must be at least 1, got {list(r.beams)}")
    for key in ("timing_sentences", "train_sentences", "human_eval_items", "gpu_watts",
                "sweep_minutes", "train_minutes", "train_steps", "valid_every"):
        if getattr(r, key) < 0:
            raise UserError(f"[reproduce] {key} must be >= 0, got {getattr(r, key)}")
    _validate_study(config)
    _validate_attention_study(config)
    _check_seeds(config)
    _check_finite(config)
    return config


def _check_seeds(config: Config) -> None:
    """Seeds feed numpy's generator (which refuses negative ones) and name folders."""
    if config.train.seed < 0:
        raise UserError(f"[train] seed must be >= 0, got {config.train.seed}")
    for where, seeds in (("[reproduce] seeds", config.reproduce.seeds),
                         ("[study] seeds", config.study.seeds)):
        if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
            raise UserError(f"{where} must be distinct integers >= 0, got {list(seeds)}")


def _check_finite(config: Config) -> None:
    """No number of any table is NaN or infinite (TOML has ``nan`` and ``inf``): the checks
    above compare with bounds, which NaN passes, and no budget, rate or power is infinite."""
    for name in SECTIONS:
        for key, value in dataclasses.asdict(getattr(config, name)).items():
            values = value if isinstance(value, (list, tuple)) else (value,)
            bad = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
            if bad:
                raise UserError(f"[{name}] {key} must be a finite number, got {bad[0]}")


def _validate_study(config: Config) -> None:
    sw, st = config.sweep, config.study
    if not sw.transforms:
        raise UserError("[sweep] transforms must name at least one output transform")
    for key in ("lr", "warmup"):
        if any(not v > 0 for v in getattr(sw, key)):
            raise UserError(f"[sweep] {key} values must be positive, got {list(getattr(sw, key))}")
    if sw.extend < 0:
        raise UserError(f"[sweep] extend must be >= 0 (lr values the sweep may add past each "
                        f"end of its grid), got {sw.extend}")
    if sw.extend and len(set(sw.lr)) < 2:
        raise UserError(f"[sweep] extend = {sw.extend} steps past the ends of [sweep] lr by the "
                        f"ratio of its two end values, and it lists {len(set(sw.lr))}; list at "
                        "least two, e.g. lr = [0.4, 0.8]")
    if any(not 0.0 <= v < 1.0 for v in sw.label_smoothing):
        raise UserError(f"[sweep] label_smoothing values must be in [0, 1), got "
                        f"{list(sw.label_smoothing)}")
    if not st.seeds:
        raise UserError("[study] seeds must list at least one seed")
    for item in st.borrow:
        name, sep, tuned = item.partition("=")
        if not (sep and name.strip() and tuned.strip() in sw.transforms):
            raise UserError(f"[study] borrow takes NAME=TUNED with TUNED one of [sweep] "
                            f"transforms {list(sw.transforms)}, got {item!r}")
        if name.strip() in sw.transforms:
            raise UserError(f"[study] borrow {item!r}: {name.strip()} is tuned by the sweep "
                            "([sweep] transforms), so it has its own configuration; borrow "
                            "for a transform the sweep does not tune, or drop it from [sweep] "
                            "transforms")
    if st.convergence_steps < 0 or st.equal_time_minutes < 0 or st.bootstrap_samples < 1:
        raise UserError("[study] convergence_steps and equal_time_minutes must be >= 0 and "
                        "bootstrap_samples >= 1")


def _validate_attention_study(config: Config) -> None:
    a = config.attention_study
    if not a.variants or len(set(a.variants)) != len(a.variants):
        raise UserError(f"[attention_study] variants must list distinct attention "
                        f"configurations, got {list(a.variants)}")
    if a.baseline not in a.variants:
        raise UserError(f"[attention_study] baseline {a.baseline!r} must be one of variants "
                        f"{list(a.variants)}")
    if not 0.0 < a.learned_fraction <= 1.0:
        raise UserError(f"[attention_study] learned_fraction must be in (0, 1], got "
                        f"{a.learned_fraction}")
    for key in ("heatmaps", "sparsity_sentences", "timing_sentences"):
        if getattr(a, key) < 0:
            raise UserError(f"[attention_study] {key} must be >= 0 (0: see its description), "
                            f"got {getattr(a, key)}")
    for key in ("bench_repeats", "timing_repeats", "bootstrap_samples"):
        if getattr(a, key) < 1:
            raise UserError(f"[attention_study] {key} must be at least 1, got {getattr(a, key)}")
    if not a.timing_beams or any(b < 1 for b in a.timing_beams):
        raise UserError(f"[attention_study] timing_beams must list beam sizes >= 1, got "
                        f"{list(a.timing_beams)}")
