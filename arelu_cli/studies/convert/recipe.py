"""The conversion study's recipe (``recipes/ptb-convert.toml``, ``[study] kind =
"convert"``): tables of its own, one frozen dataclass per TOML table, each field documented
where it is declared; unknown tables and keys, wrong types and impossible values are errors
that say what to do (:func:`from_tables`, the study's schema:
:attr:`arelu_cli.studies.contract.Study.schema`). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from arelu_cli.config.load import read_table
from arelu_cli.util.errors import UserError

KIND = "convert"
ARMS = ("softmax", "relu-tau_for", "relu-tau_dev", "entmax", "relu-analytic", "relu-lora")
"""The fine-tuning arms, each from the pretrained checkpoint: softmax continued (the control);
1.5-ReLU with tau from the pretrained model's logits (``tau_for``), with tau chosen on dev
from a grid around it, with the analytic tau of an untrained model; exact 1.5-entmax; and
1.5-ReLU with LoRA at the tau rule that wins (``tau_for`` or ``tau_dev``, on dev)."""


@dataclass(frozen=True)
class StudySection:
    kind: str = KIND
    """The study (:mod:`arelu_cli.studies.runner` finds it by this name)."""
    threads: int = 1
    """torch CPU threads of every training and evaluation (0: torch's own count)."""


@dataclass(frozen=True)
class DataSection:
    path: str = "data/ptb"
    """Prepared language-modelling corpus (``arelu prepare ptb --source ...``)."""
    block_size: int = 128
    """Tokens per training block and teacher-forced evaluation window."""
    max_tokens: int = 2048
    """Tokens per optimizer step (``max_tokens // block_size`` blocks)."""


@dataclass(frozen=True)
class ModelSection:
    """A ``transformers`` ``LlamaConfig``; the vocabulary is the corpus's."""

    hidden_size: int = 256
    layers: int = 4
    heads: int = 4
    intermediate_size: int = 1024
    """SwiGLU inner size."""
    attention_dropout: float = 0.1
    """Llama's only dropout: what the seeds draw besides the batch order."""
    tie_embeddings: bool = True


@dataclass(frozen=True)
class PretrainSection:
    steps: int = 1200
    lr: float = 2e-3
    warmup: int = 100
    min_lr_rate: float = 0.1
    """Cosine decay from ``lr`` to ``min_lr_rate * lr`` at ``steps``."""
    weight_decay: float = 0.1
    seed: int = 1
    ppl_stride: int = 64
    """Sliding-window stride of the pretrained model's test perplexity (the PTB study's)."""


@dataclass(frozen=True)
class FinetuneSection:
    arms: tuple[str, ...] = ARMS
    """Which of :data:`ARMS` to train, in this order within each seed."""
    steps: int = 200
    lr: float = 5e-4
    warmup: int = 20
    """Linear warmup, then linear decay to 0 at ``steps``."""
    weight_decay: float = 0.0
    seeds: tuple[int, ...] = (1, 2, 3)
    """Each seed draws the fine-tuning batch order and the dropout."""
    eval_steps: tuple[int, ...] = (0, 50, 100, 200)
    """Steps whose weights are kept and evaluated; 0 is the pretrained model."""
    alpha: float = 1.5
    entmax: str = "1.5-entmax-k1024"
    """The entmax arm's registry name (exact 1.5-entmax; a partial sort of 1,024)."""
    tau_grid: tuple[float, ...] = (0.5, 0.75, 1.0, 1.5, 2.0)
    """Multiples of the ``tau_for`` tau tried for ``relu-tau_dev`` (1.0 is ``relu-tau_for``)."""
    grid_steps: int = 100
    """Steps each grid point trains (seed ``seeds[0]``) before dev chooses; an eval step."""
    lora_rank: int = 16
    lora_alpha: float = 32.0
    lora_dropout: float = 0.05
    lora_lr: float = 2e-3
    save_every: int = 50
    """Steps between resumable states (a killed run loses at most this many)."""
    log_every: int = 10


@dataclass(frozen=True)
class ReferenceSection:
    scratch: bool = True
    """Train 1.5-ReLU from scratch for pretrain + fine-tune steps (the pretrain schedule, the
    analytic tau an untrained model gets) as the reference, at seed ``[pretrain] seed``."""
    lm_study: str = ""
    """The results folder of an LM study (``arelu study ptb-lm-study``) on the same corpus,
    relative to the current folder: the report states the pretrained model's test perplexity
    against its softmax model's (its ``summary.csv``); empty: against none."""


@dataclass(frozen=True)
class EvalSection:
    prompts: int = 500
    """The first test prompts (the PTB study's 500)."""
    prefix_tokens: int = 5
    max_new_tokens: int = 60
    stride: int = 128
    """Teacher-forced window stride of every evaluation (``block_size``: no overlap)."""
    gen_seed: int = 0
    softmax_top_p: tuple[float, ...] = (1.0, 0.9)
    """Softmax models are sampled at each nucleus p (1.0: pure sampling); sparse models are
    sampled purely."""
    bootstrap_samples: int = 1000


@dataclass(frozen=True)
class Recipe:
    study: StudySection = field(default_factory=StudySection)
    data: DataSection = field(default_factory=DataSection)
    model: ModelSection = field(default_factory=ModelSection)
    pretrain: PretrainSection = field(default_factory=PretrainSection)
    finetune: FinetuneSection = field(default_factory=FinetuneSection)
    reference: ReferenceSection = field(default_factory=ReferenceSection)
    eval: EvalSection = field(default_factory=EvalSection)

    def to_dict(self) -> dict:
        """The recipe as TOML-like nested tables (lists for tuples): the record's."""
        return {name: {f.name: list(v) if isinstance(v := getattr(getattr(self, name), f.name),
                                                      tuple) else v
                       for f in fields(getattr(self, name))} for name in TABLES}


TABLES = {f.name: f.default_factory for f in fields(Recipe)}


def check(recipe: Recipe) -> Recipe:
    """Refuse a recipe that could not give the study's tables, before any training."""
    d, m, p, f, e = recipe.data, recipe.model, recipe.pretrain, recipe.finetune, recipe.eval
    if recipe.study.kind != KIND:
        raise UserError(f"[study] kind is {recipe.study.kind!r}, but these are the tables of the "
                        f"conversion study: set it to \"{KIND}\"")
    if recipe.study.threads < 0:
        raise UserError(f"[study] threads must be >= 0 (0: torch's own count), got "
                        f"{recipe.study.threads}")
    if not 1 <= d.block_size <= d.max_tokens:
        raise UserError(f"[data] block_size must be in [1, max_tokens], got {d.block_size}")
    if m.hidden_size % m.heads:
        raise UserError(f"[model] heads ({m.heads}) must divide hidden_size ({m.hidden_size})")
    for name, value in (("[pretrain] steps", p.steps), ("[finetune] steps", f.steps),
                        ("[eval] prefix_tokens", e.prefix_tokens),
                        ("[eval] max_new_tokens", e.max_new_tokens)):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    unknown = [a for a in f.arms if a not in ARMS]
    if unknown or not f.arms or len(set(f.arms)) < len(f.arms):
        raise UserError(f"[finetune] arms must name each of {', '.join(ARMS)} at most once, "
                        f"got {list(f.arms)}")
    if not f.seeds or len(set(f.seeds)) < len(f.seeds):
        raise UserError(f"[finetune] seeds must be distinct and at least one, got {f.seeds}")
    steps = sorted(set(f.eval_steps))
    if not steps or steps[0] != 0 or steps[-1] != f.steps or list(f.eval_steps) != steps:
        raise UserError(f"[finetune] eval_steps must rise from 0 to steps ({f.steps}), got "
                        f"{list(f.eval_steps)}")
    if "relu-tau_dev" in f.arms and (1.0 not in f.tau_grid or f.grid_steps not in steps
                                     or "relu-tau_for" not in f.arms):
        raise UserError("relu-tau_dev needs relu-tau_for among the arms, 1.0 in [finetune] "
                        "tau_grid and grid_steps among eval_steps")
    if "relu-lora" in f.arms and not {"relu-tau_for", "relu-tau_dev"} & set(f.arms):
        raise UserError("relu-lora takes the winning tau rule: train relu-tau_for (and "
                        "relu-tau_dev) too")
    if any(x <= 0 for x in f.tau_grid):
        raise UserError(f"[finetune] tau_grid holds multiples of tau, > 0; got {f.tau_grid}")
    if not 1 <= e.stride <= d.block_size or not 1 <= p.ppl_stride <= d.block_size:
        raise UserError("[eval] stride and [pretrain] ppl_stride must be in [1, block_size]")
    if not e.softmax_top_p or any(not 0 < p_ <= 1 for p_ in e.softmax_top_p):
        raise UserError(f"[eval] softmax_top_p must hold values in (0, 1], got {e.softmax_top_p}")
    if not {1.0, 0.9} <= set(e.softmax_top_p):
        raise UserError("[eval] softmax_top_p must include 1.0 and 0.9: the control's pure and "
                        "nucleus sampling, the references of the comparisons")
    if f.save_every < 1 or f.log_every < 1:
        raise UserError("[finetune] save_every and log_every must be at least 1")
    return recipe


def from_tables(tables: Mapping[str, object]) -> Recipe:
    """The checked recipe of a recipe's (or a record's) tables."""
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise UserError(f"unknown table(s) {', '.join(f'[{u}]' for u in unknown)}; the "
                        f"conversion recipe has {', '.join(f'[{t}]' for t in TABLES)}")
    return check(Recipe(**{name: read_table(name, type(make()), tables.get(name, {}))
                           for name, make in TABLES.items()}))

