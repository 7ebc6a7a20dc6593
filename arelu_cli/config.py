"""Experiment configuration: frozen dataclasses mirrored by the TOML tables of ``recipes/``.

A recipe has five tables, ``[data]``, ``[model]``, ``[train]``, ``[decode]`` and
``[reproduce]`` (the grid of ``arelu reproduce``), whose keys
are the fields below (each documented where it is declared). Defaults are the paper's
IWSLT'14 settings (Appendix "Optimization": Transformer Base with FFN 1024, Adam
(0.9, 0.998), Noam decay with lr 2.0 and 4000 warmup steps, dropout 0.3, no label
smoothing). Unknown keys, wrong types and impossible values raise :class:`UserError`
saying what to do; command-line flags override recipe values (:func:`load_config`).
Standard library only.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from arelu_cli.errors import UserError

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16"]


@dataclass(frozen=True)
class DataConfig:
    path: str = "data/iwslt14"
    """Prepared corpus folder, written by ``arelu prepare``."""
    max_tokens: int = 4096
    """Token budget of one training batch (padded size, per process and micro-batch)."""
    valid_split: str = "dev"
    """Split used for validation loss and BLEU."""


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 512
    """Hidden size; the embedding size too."""
    encoder_layers: int = 6
    decoder_layers: int = 6
    heads: int = 8
    """Attention heads; must divide ``d_model``."""
    d_ff: int = 1024
    """Inner size of the position-wise feed-forward layers (paper: 1024 IWSLT, 2048 WMT)."""
    dropout: float = 0.3
    """Dropout on embeddings, sub-layer outputs and inside the feed-forward layers."""
    attention_dropout: float = 0.1
    """Dropout on attention weights."""
    share_embeddings: bool = False
    """One embedding matrix for encoder and decoder (needs a joint vocabulary)."""
    tie_output: bool = False
    """The decoder's output projection reuses its input embedding matrix."""
    max_positions: int = 1024
    """Longest sequence the sinusoidal position table covers."""
    attention: str = "softmax"
    """Transform of the attention scores, by registry name (softmax, sparsemax, 1.5-entmax,
    <a>-relu...), for every kind not set below; see :mod:`arelu_cli.nmt.attention`."""
    attention_encoder: str = ""
    """Encoder self-attention's transform; empty: ``attention``."""
    attention_decoder: str = ""
    """Decoder self-attention's transform; empty: ``attention``."""
    attention_cross: str = ""
    """Cross-attention's transform; empty: ``attention``."""
    attention_relu: Literal["raw", "estimated", "renormalized"] = "raw"
    """alpha-ReLU attention variant: ``raw`` (constant ``attention_tau``, unnormalized),
    ``estimated`` (tau from the analytic estimate per number of keys) or ``renormalized``
    (divided by its sum plus 1e-6)."""
    attention_tau: float = 0.0
    """The constant tau of ``raw`` and ``renormalized`` alpha-ReLU attention."""


@dataclass(frozen=True)
class TrainConfig:
    transform: str = "softmax"
    """Output transform and loss by registry name: softmax, sparsemax, 1.5-entmax, 1.5-relu..."""
    tau: str | float = "auto"
    """alpha-ReLU threshold: a number, ``auto`` (mean 1.5-entmax tau(z) of the first batch
    through the untrained model, the paper's method) or ``analytic`` (the paper's Lemma)."""
    seed: int = 1
    lr: float = 2.0
    """Noam learning-rate factor: lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    warmup: int = 4000
    """Noam warmup steps."""
    adam_beta1: float = 0.9
    adam_beta2: float = 0.998
    adam_eps: float = 1e-9
    accum: int = 8
    """Micro-batches per optimizer step and process (gradient accumulation)."""
    max_steps: int = 100_000
    """Optimizer steps to train for."""
    max_minutes: float = 0.0
    """Wall-clock budget in minutes, validation included; 0 means no limit."""
    clip_norm: float = 0.0
    """Clip the gradient's global L2 norm to this; 0 disables clipping."""
    label_smoothing: float = 0.0
    """Label smoothing epsilon in [0, 1) of the training loss, for every output transform:
    the target becomes ``(1 - eps) e_y + eps / V`` (cross-entropy to it for softmax, the
    Fenchel-Young / alpha-ReLU loss with it in place of the one-hot otherwise; gradient
    ``p - q``). 0 is the paper's setting. The logged ``train_loss`` is the smoothed loss;
    ``val_loss`` is always the unsmoothed one, comparable across settings."""
    average_decay: float = 0.0
    """Exponential moving average of the weights (OpenNMT's ``average_decay``), used for
    validation and the saved best model; 0 disables it."""
    log_every: int = 100
    """Steps between rows of the training log."""
    valid_every: int = 1000
    """Steps between validations (loss and greedy BLEU)."""
    save_every: int = 1000
    """Steps between resumable checkpoints (``last.pt``)."""
    keep_every: int = 0
    """Steps between kept weight snapshots ``steps/step-N.pt`` (the weights decoding uses),
    so that a model can be evaluated at any of those steps later, e.g. at equal steps or at
    the step another transform reaches in equal time; 0 keeps none."""
    stats_rows: int = 256
    """Logit rows per logging step on which tau(z), Sum p and non-zeros are measured."""
    device: Device = "auto"
    precision: Precision = "auto"
    """``auto``: bf16 autocast on CUDA, fp32 on CPU; loss math is always fp32."""
    compile: bool = False
    """Run the model through ``torch.compile``."""
    fused_output: bool = False
    """Fuse the output projection with the loss (alpha-ReLU transforms only):
    ``linear_alpha_relu_loss`` never holds the N x V logits; same loss and gradients up to
    rounding. The logged statistics are then computed on logits recomputed from the
    decoder's output without gradients."""
    threads: str | int = "auto"
    """torch intra-op CPU threads of training: ``auto`` starts at torch's count and lets
    :mod:`arelu_cli.nmt.threads` switch to fewer while another process competes for the cores
    (and back when it leaves), from measured tokens/s; single-process CPU training only,
    elsewhere torch's count stays. An integer fixes the count (bitwise-identical reruns:
    a switch changes the rounding of sums)."""


@dataclass(frozen=True)
class DecodeConfig:
    max_length_ratio: float = 1.5
    """Hypotheses stop at ``max_length_ratio * source length + max_length_offset`` tokens."""
    max_length_offset: int = 10
    max_tokens: int = 8192
    """Token budget of one decoding batch."""
    beam: int = 5
    """Beam size of ``arelu translate`` and the analyses (1: greedy); validation is greedy."""
    length_penalty: float = 0.0
    """GNMT length penalty exponent a: finished hypotheses rank by score / ((5 + len) / 6)^a;
    0 ranks by the raw score (OpenNMT-py's default, which the paper used)."""


@dataclass(frozen=True)
class ReproduceConfig:
    """The grid of ``arelu reproduce``: which transforms, the tau sweep, the analyses."""

    corpus: str = "iwslt14"
    """``arelu prepare`` corpus name that fills ``[data] path``."""
    transforms: tuple[str, ...] = ("softmax", "sparsemax", "1.5-entmax", "1.5-entmax-k100",
                                   "1.5-relu")
    """Output transforms of Table 1, trained one after another with this recipe."""
    train_minutes: float = 0.0
    """Wall-clock budget of each of those runs (0: ``[train] max_minutes``)."""
    train_steps: int = 0
    """Optimizer steps of each of those runs (0: ``[train] max_steps``): a step budget gives
    the same models on every machine, however busy."""
    valid_every: int = 0
    """Validation interval of those runs (0: ``[train] valid_every``)."""
    tau_sweep: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 5.0, 10.0)
    """Fixed taus of 1.5-ReLU runs for the tau-sweep figure (the paper's early training)."""
    sweep_steps: int = 4000
    """Optimizer steps of each tau-sweep run (the figure shows early training only)."""
    sweep_minutes: float = 0.0
    """Wall-clock budget of each tau-sweep run (0: none)."""
    beams: tuple[int, ...] = (1, 2, 4, 8, 12)
    """Beam sizes of the inference-time figure."""
    timing_sentences: int = 0
    """Test sentences timed per beam size (0: all)."""
    timing_repeats: int = 3
    """Timings per transform and beam size, interleaved; the figure keeps the median."""
    train_sentences: int = 1000
    """Training sentences sampled for the train-set sparsity figure."""
    human_eval_items: int = 135
    """Items of the blind human-evaluation sheets (the paper: 135)."""
    gpu_watts: float = 0.0
    """Power of one accelerator for the kWh column of training_time.csv (0: left blank)."""
    seeds: tuple[int, ...] = ()
    """Training seeds: every run of the grid (each transform, each tau of the sweep) is
    trained, translated and analysed once per seed; empty: the ``[train] seed`` only."""


@dataclass(frozen=True)
class SweepConfig:
    """The tuning sweep of ``arelu study`` (:mod:`arelu_cli.pipeline.sweep`): per transform, the
    training configurations tried, selected on dev BLEU only. An empty list keeps the
    ``[train]`` value."""

    transforms: tuple[str, ...] = ("softmax", "1.5-relu")
    """Transforms tuned, each on its own."""
    lr: tuple[float, ...] = ()
    """Noam learning-rate factors tried."""
    warmup: tuple[int, ...] = ()
    """Noam warmup steps tried."""
    label_smoothing: tuple[float, ...] = ()
    """Label smoothing epsilons tried (the first is the starting point of a sequential sweep)."""
    order: Literal["sequential", "grid"] = "sequential"
    """``sequential``: lr first, then warmup, then label smoothing, each at the best so far;
    ``grid``: every combination."""


@dataclass(frozen=True)
class StudyConfig:
    """The stages of ``arelu study`` after the sweep: seeds, convergence, equal steps and
    equal time, significance."""

    seeds: tuple[int, ...] = (1, 2, 3)
    """Seeds of every compared transform at its selected configuration (the sweep's runs are
    the ``[train] seed`` ones)."""
    borrow: tuple[str, ...] = ()
    """``NAME=TUNED``: also train NAME at every seed with TUNED's selected configuration,
    e.g. ``1.5-entmax-k100=1.5-relu`` (k100 computes 1.5-entmax exactly while its support
    stays under 100)."""
    convergence_steps: int = 3000
    """The sweep's transforms at seed ``[train] seed`` continue to this many steps (0: no
    convergence stage)."""
    equal_time_minutes: float = 0.0
    """Training minutes of the equal-time comparison, converted to steps with the quiet
    ``bench train`` step times; 0: the time the fastest transform needs for ``[train]
    max_steps`` steps."""
    baseline: str = "softmax"
    """The transform every other one is tested against (paired bootstrap)."""
    bootstrap_samples: int = 1000
    """Resamples of the paired bootstrap test."""


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    reproduce: ReproduceConfig = field(default_factory=ReproduceConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    study: StudyConfig = field(default_factory=StudyConfig)

    def to_dict(self) -> dict:
        """Plain nested dict (what checkpoints and ``config.json`` store)."""
        return dataclasses.asdict(self)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig,
            "decode": DecodeConfig, "reproduce": ReproduceConfig, "sweep": SweepConfig,
            "study": StudyConfig}


def _coerce(section: str, key: str, hint: object, value: object) -> object:
    """``value`` as the field's type, or a UserError naming the key and what it expects."""
    where = f"[{section}] {key}"
    if typing.get_origin(hint) is Literal:
        if value not in typing.get_args(hint):
            raise UserError(f"{where} must be one of {', '.join(map(repr, typing.get_args(hint)))}, "
                            f"got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{where} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise UserError(f"{where} must be a string, got {value!r}")
        return value
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return tuple(_coerce(section, key, item, v) for v in value)
    if hint == str | int:  # [train] threads
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise UserError(f"{where} must be an integer or a string, got {value!r}")
    # str | float: alpha-ReLU's tau.
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise UserError(f"{where} must be a number or a string, got {value!r}")


def _section(name: str, table: Mapping[str, object]) -> object:
    cls = SECTIONS[name]
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(table) - set(hints))
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(unknown)} in [{name}]; known keys: "
                        f"{', '.join(hints)}")
    return cls(**{key: _coerce(name, key, hints[key], value) for key, value in table.items()})


def _positive(where: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):  # an infinite lr trains to NaN
        raise UserError(f"{where} must be positive and finite, got {value}")


def check_config(config: Config) -> Config:
    """Check values that are well typed but impossible; return ``config`` unchanged."""
    m, t, d = config.model, config.train, config.decode
    for key in ("d_model", "encoder_layers", "decoder_layers", "heads", "d_ff", "max_positions"):
        _positive(f"[model] {key}", getattr(m, key))
    if m.d_model % m.heads:
        raise UserError(f"[model] heads ({m.heads}) must divide d_model ({m.d_model})")
    if m.d_model % 2:
        raise UserError(f"[model] d_model must be even for sinusoidal positions, got {m.d_model}")
    for key in ("dropout", "attention_dropout"):
        if not 0.0 <= getattr(m, key) < 1.0:
            raise UserError(f"[model] {key} must be in [0, 1), got {getattr(m, key)}")
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
    if t.fused_output and t.label_smoothing:
        raise UserError("[train] label_smoothing is not available with fused_output yet; set "
                        "fused_output = false or label_smoothing = 0")
    if t.threads != "auto" and not (isinstance(t.threads, int) and t.threads >= 1):
        raise UserError(f"[train] threads must be 'auto' or a positive integer (torch's CPU "
                        f"threads), got {t.threads!r}")
    _positive("[data] max_tokens", config.data.max_tokens)
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
    if st.convergence_steps < 0 or st.equal_time_minutes < 0 or st.bootstrap_samples < 1:
        raise UserError("[study] convergence_steps and equal_time_minutes must be >= 0 and "
                        "bootstrap_samples >= 1")


def from_dict(tables: Mapping[str, Mapping[str, object]]) -> Config:
    """A validated :class:`Config` from nested tables (a parsed recipe or a checkpoint's)."""
    unknown = sorted(set(tables) - set(SECTIONS))
    if unknown:
        raise UserError(f"unknown table(s) {', '.join(f'[{u}]' for u in unknown)}; a recipe has "
                        f"{', '.join(f'[{s}]' for s in SECTIONS)}")
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise UserError(f"[{name}] must be a table of keys, got {table!r}")
    return check_config(Config(**{name: _section(name, tables.get(name, {})) for name in SECTIONS}))


def parse_override(item: str) -> tuple[str, str, object]:
    """``"train.lr=1.5"`` -> ``("train", "lr", 1.5)``; the value is read as TOML (bare
    words are strings)."""
    key, sep, text = item.partition("=")
    section, dot, name = key.strip().partition(".")
    if not (sep and dot and section and name):
        raise UserError(f"--set takes SECTION.KEY=VALUE (e.g. train.lr=1.5), got {item!r}")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return section, name, value


RECIPES = Path(__file__).resolve().parent / "recipes"
"""The recipes that ship with the package (the repository's ``recipes/`` links here)."""


def resolve_recipe(name: str | Path) -> Path:
    """A recipe file: ``name`` itself when it is a file, else ``./recipes/NAME.toml``, else
    the recipe of that name that ships with the package (``toy``, ``toy.toml`` and
    ``recipes/toy.toml`` all mean ``arelu_cli/recipes/toy.toml`` then), so the documented
    commands work from any folder."""
    path = Path(name)
    if path.is_file():
        return path
    if path.parent in (Path("."), Path("recipes")):
        for folder in (Path("recipes"), RECIPES):
            candidate = folder / f"{path.name.removesuffix('.toml')}.toml"
            if candidate.is_file():
                return candidate
    known = sorted(p.stem for p in RECIPES.glob("*.toml"))
    raise UserError(f"no recipe {str(name)!r}: give a TOML file or one of "
                    f"{', '.join(known) or '(none)'} (the recipes that ship with arelu)")


def read_recipe(recipe: str | Path) -> dict[str, object]:
    """The tables of the TOML file ``recipe``; anything but a readable TOML file (missing,
    a folder, unreadable, not UTF-8, not TOML) is a one-line :class:`UserError`."""
    path = Path(recipe)
    hint = "give a TOML file (recipes live in recipes/*.toml)"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"recipe {path} does not exist; {hint}") from None
    except IsADirectoryError:
        raise UserError(f"recipe {path} is a folder, not a file; {hint}") from None
    except OSError as err:
        raise UserError(f"cannot read recipe {path} ({err.strerror or err}); {hint}") from None
    except UnicodeDecodeError:
        raise UserError(f"recipe {path} is not UTF-8 text; {hint}") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"recipe {path} is not valid TOML: {err}") from None


def load_config(recipe: str | Path | None = None,
                overrides: Mapping[tuple[str, str], object] | None = None,
                base: Mapping[str, Mapping[str, object]] | None = None) -> Config:
    """Read a TOML recipe (or start from ``base`` tables, e.g. a checkpoint's config, or from
    the defaults) and apply ``{(section, key): value}`` overrides, e.g. from command-line
    flags; ``None`` values are ignored."""
    tables = read_recipe(recipe) if recipe is not None else base or {}
    tables = {name: dict(table) if isinstance(table, Mapping) else table
              for name, table in tables.items()}
    for (section, key), value in (overrides or {}).items():
        if value is not None:
            if section not in SECTIONS:
                raise UserError(f"unknown table [{section}] in an override; known: "
                                f"{', '.join(SECTIONS)}")
            tables.setdefault(section, {})[key] = value
    return from_dict(tables)
