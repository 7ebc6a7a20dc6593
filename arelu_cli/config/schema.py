"""The configuration's schema: one frozen dataclass per table of a recipe, each field
documented where it is declared, and :data:`SECTIONS` (table name -> class). Defaults are the
paper's IWSLT'14 settings. What reads recipes into these is :mod:`arelu_cli.config.load`.
Standard library only.

The studies' own tables (``[sweep]``, ``[attention_study]``, ``[lm_study]``) are declared
here too, not in their folders: every checkpoint, run record and study record stores the
whole :class:`Config`, and what reads one back (:mod:`arelu_cli.model.checkpoint`, below
the studies) checks every table of it, an unknown one being an error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16"]


@dataclass(frozen=True)
class DataConfig:
    path: str = "data/iwslt14"
    """Prepared corpus folder, written by ``arelu prepare``."""
    max_tokens: int = 4096
    """Token budget of one training batch (padded size, per process and micro-batch)."""
    valid_split: str = "dev"
    """Split used for validation loss and BLEU (a language model's: loss and perplexity)."""
    task: Literal["translation", "lm"] = "translation"
    """``translation``: the encoder-decoder on sentence pairs; ``lm``: a decoder-only language
    model (:mod:`arelu_cli.model.lm`) on a language-modelling folder (``arelu prepare
    ptb|tinyshakespeare|text|toy-lm``), trained on fixed-length blocks of its token stream."""
    block_size: int = 128
    """``lm`` only: tokens per training and evaluation block (:mod:`arelu_cli.data.blocks`);
    at most ``[model] max_positions``. A batch is ``max_tokens // block_size`` blocks."""


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
    <a>-relu...), for every kind not set below; see :mod:`arelu_cli.model.attention`."""
    attention_encoder: str = ""
    """Encoder self-attention's transform; empty: ``attention``."""
    attention_decoder: str = ""
    """Decoder self-attention's transform; empty: ``attention``."""
    attention_cross: str = ""
    """Cross-attention's transform; empty: ``attention``."""
    attention_relu: Literal["raw", "estimated", "renormalized"] = "raw"
    """alpha-ReLU attention variant: ``raw`` (constant ``attention_tau``, unnormalized),
    ``estimated`` (tau from the analytic estimate per number of keys) or ``renormalized``
    (divided by its sum plus ``attention_eps``)."""
    attention_tau: float = 0.0
    """The constant tau of ``raw`` and ``renormalized`` alpha-ReLU attention."""
    attention_eps: float = 0.01
    """The constant added to the sum of ``renormalized`` alpha-ReLU attention (> 0): the
    weight of a lone key rises from 0 to 1 within ``sqrt(eps)`` of the threshold, so a small
    one makes steep gradients; see :data:`arelu_cli.model.attention.RENORM_EPS`."""


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
    """``auto``: bf16 autocast where the hardware computes bf16 natively (CUDA; a CPU with
    AVX512-BF16 or AMX), fp32 elsewhere (:mod:`arelu_cli.train.precision`); loss math is always
    fp32."""
    compile: bool = False
    """Run the model through ``torch.compile``."""
    fused_output: bool = False
    """Fuse the output projection with the loss (alpha-ReLU transforms only):
    ``linear_alpha_relu_loss`` never holds the N x V logits; same loss and gradients up to
    rounding. The logged statistics are then computed on logits recomputed from the
    decoder's output without gradients."""
    tensorboard: bool = True
    """Write TensorBoard event files of the logged scalars (losses, lr, tokens/s, support
    size, Sum p, tau, share of zeros, dev BLEU or perplexity) into ``RUN/tensorboard/`` next
    to ``log.csv`` (:mod:`arelu_cli.train.events`); main process only. ``false``: the CSV
    only."""
    threads: str | int = "auto"
    """torch intra-op CPU threads of training: ``auto`` starts at torch's count and lets
    :mod:`arelu_cli.train.threads` switch to fewer while another process competes for the cores
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
    """Output transforms of Table 1, trained with this recipe (side by side on a CPU: ``jobs``)."""
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
    jobs: str | int = "auto"
    """Training runs at a time: ``auto`` trains every run not done at once on a CPU (at most
    two per core), each on its share of the cores, and one at a time on a GPU or against the
    clock (``train_minutes``); ``1`` one after another (:mod:`arelu_cli.studies.side_by_side`)."""


@dataclass(frozen=True)
class SweepConfig:
    """The tuning sweep of the studies that tune (:mod:`arelu_cli.studies.sweep`): per
    transform, the training configurations tried, selected on the dev score only. An empty list keeps the
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
    extend: int = 0
    """How many lr values the sweep may add past each end of ``lr`` while the best lr is at
    that end, each the end value times the ratio of the two listed values there (a doubling
    grid goes on doubling), so that the selected lr lies inside what was tried; 0: ``lr`` as
    listed."""


@dataclass(frozen=True)
class StudyConfig:
    """Which study a recipe runs (``arelu study RECIPE``), its seeds, and the stages of the
    tuned study after its sweep: convergence, equal steps and equal time, significance."""

    kind: str = ""
    """The study (a folder of :mod:`arelu_cli.studies`): ``tuned`` (the tuned translation
    study), ``attention``, ``lm``; ``paper`` is the paper's grid, which ``arelu reproduce``
    runs; empty: the recipe runs no study. (``convert`` has tables of its own, this one
    included: :mod:`arelu_cli.studies.convert.recipe`.)"""
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
class AttentionStudyConfig:
    """The attention study (``[study] kind = "attention"``, beyond the paper,
    :mod:`arelu_cli.studies.attention.study`): one model per attention configuration, the
    output transform ``[train] transform`` and everything else of the recipe fixed."""

    variants: tuple[str, ...] = ("softmax", "1.5-entmax", "sparsemax", "1.5-relu-raw",
                                 "1.5-relu-estimated", "1.5-relu-renormalized")
    """Attention configurations compared: a registry name (softmax, sparsemax, 1.5-entmax...)
    for every kind, an alpha-ReLU one with its ``[model] attention_relu`` variant as a
    suffix (``1.5-relu-raw``, ``-estimated``, ``-renormalized``) and, for the renormalized
    one, optionally its ``[model] attention_eps`` (``1.5-relu-renormalized-eps0.01``)."""
    baseline: str = "softmax"
    """The variant every other one is compared with (BLEU difference, paired bootstrap, speed
    ratios); it must be one of ``variants``."""
    learned_fraction: float = 0.5
    """A variant "learns" when its last dev BLEU reaches this fraction of the baseline's."""
    heatmaps: int = 2
    """Test sentences whose cross-attention is drawn per variant (0: none)."""
    sparsity_sentences: int = 0
    """Test sentences of the attention-sparsity counts (0: all)."""
    timing: bool = True
    """Measure training step time and decoding time (they want an otherwise idle machine)."""
    bench_repeats: int = 10
    """Timed optimizer steps per variant, each paired with one of the baseline's."""
    timing_beams: tuple[int, ...] = (1, 5)
    """Beam sizes of the decoding-time comparison."""
    timing_sentences: int = 200
    """Test sentences decoded per timing (0: all)."""
    timing_repeats: int = 3
    """Interleaved decoding timings per variant and beam; the median counts."""
    bootstrap_samples: int = 1000
    """Resamples of the paired bootstrap test against the baseline."""


@dataclass(frozen=True)
class LmStudyConfig:
    """The open-ended generation study (``[study] kind = "lm"``, :mod:`arelu_cli.studies.lm.study`):
    language models of several output transforms, each tuned on dev ([sweep] lr) and trained at
    every ``[study] seeds``, every model x decoding measured by ``arelu lm-eval``."""

    transforms: tuple[str, ...] = ("softmax", "1.5-relu", "1.5-entmax-k1024", "2-entmax-k100")
    """Output transforms compared, each tuned on its own (``<a>-entmax-k<k>``: exact entmax
    with a partial sort, much faster than a full sort over a 10K vocabulary; a language
    model's 1.5-entmax keeps ~1,200 tokens, so its k is 1,024, where k = 100 would widen four
    times a row: the PTB study's recipe gives the measurement)."""
    sweep_steps: int = 1000
    """Optimizer steps of each lr-sweep run, selected on its dev loss; the selected run of the
    ``[train] seed`` then continues (in a copy) to ``[train] max_steps``."""
    decodings: tuple[str, ...] = ("sample", "sample-top_p0.9", "greedy")
    """Decodings of every model where the transform allows them (``sample``, ``greedy``,
    ``sample-top_p<P>`` and ``sample-top_k<K>`` for softmax)."""
    tau_shifts: tuple[float, ...] = (-0.5, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5)
    """Decode-time shifts of alpha-ReLU's tau tried on dev with the ``[train] seed`` model;
    the one of the lowest dev epsilon-perplexity gives every seed one more decoding,
    ``sample-tau_dev`` (empty: none)."""
    baseline: str = "softmax"
    """The transform of the reference system every other one is tested against."""
    reference: str = "sample-top_p0.9"
    """The baseline's decoding that is the reference (nucleus sampling)."""
    prompts: int = 500
    """Test prompts generated from (the first ones; 0: all)."""
    prefix_tokens: int = 5
    """Prompt tokens per test line (Martins et al., 2020)."""
    max_new_tokens: int = 60
    """New tokens per continuation at most (a continuation also ends at end of sentence)."""
    stride: int = 64
    """Teacher-forced windows every ``stride`` tokens (0: blocks)."""
    gen_seed: int = 0
    """Seed of the generation draws."""
    bootstrap_samples: int = 1000
    """Resamples of the paired bootstrap over test prompts."""


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    reproduce: ReproduceConfig = field(default_factory=ReproduceConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    study: StudyConfig = field(default_factory=StudyConfig)
    attention_study: AttentionStudyConfig = field(default_factory=AttentionStudyConfig)
    lm_study: LmStudyConfig = field(default_factory=LmStudyConfig)

    def to_dict(self) -> dict:
        """Plain nested dict (what checkpoints and ``config.json`` store)."""
        return dataclasses.asdict(self)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig,
            "decode": DecodeConfig, "reproduce": ReproduceConfig, "sweep": SweepConfig,
            "study": StudyConfig, "attention_study": AttentionStudyConfig,
            "lm_study": LmStudyConfig}
