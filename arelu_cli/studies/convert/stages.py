"""The conversion study's stages (``[study] kind = "convert"``, ``arelu study RECIPE``): which
runs to train, which evaluations to make, in which order; each stage is skipped where its
final files exist, so the same command continues a study that was stopped (a run resumes
from its ``state.pt``).

Folder ``OUT``:

* ``recipe.json``: the recipe's tables; the ``[data]``, ``[model]`` and ``[pretrain]`` tables
  every run depends on must stay as they were (a run's own settings are checked by its
  ``RunSpec``, :func:`~arelu_cli.studies.convert.train.check_spec`);
* ``pretrain/``: the softmax Llama trained from scratch (a run folder,
  :mod:`~arelu_cli.studies.convert.train`); ``pretrain/eval-ppl/``: its test perplexity at
  the PTB study's stride; ``taus.json``: ``tau_for`` of its logits on one training batch, the
  analytic tau and the exact mean 1.5-entmax threshold of the same logits;
* ``runs/NAME/step-0/``: the pretrained weights with run NAME's transform (``model/``) and
  their evaluation (``eval/``); ``runs/NAME/seed-S/``: the fine-tuning run and
  ``eval/step-N/`` per evaluated step. NAME is ``softmax``, ``relu-tau_for``, ``entmax``,
  ``relu-analytic``, ``relu-lora``, ``relu-xF`` (the tau grid: F times ``tau_for``) or
  ``scratch`` (1.5-ReLU from scratch, ``seed-S`` at the pretrain seed);
* ``selection.json``: the grid's choice on dev (``relu-tau_dev`` is the chosen ``relu-xF``,
  or ``relu-tau_for`` itself for F = 1) and the tau rule LoRA uses; ``grid.csv``: the dev
  epsilon-perplexity of every grid point after ``grid_steps``;
* ``human.tokens.json`` (:mod:`arelu_cli.studies.generations`); ``driver.log``: every
  progress line, time-stamped.

Order: pretrain; then seed by seed, every arm of ``[finetune] arms`` (so that a study stopped
early has every arm at the first seeds), the report of what is finished written after each
seed; then the scratch reference. Everything trains through ``transformers``
(:mod:`~arelu_cli.studies.convert.train`), not through the core's trainer, with ``[study]
threads`` torch threads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape

from arelu_cli.data.prepared import Prepared, load_prepared
from arelu_cli.studies.contract import Context
from arelu_cli.studies.convert import evaluate as E
from arelu_cli.studies.convert.layout import (GRID, LOG, RECIPE, SELECTION, TAUS, grid_name,
                                             selection)
from arelu_cli.studies.convert.recipe import Recipe
from arelu_cli.studies.convert.train import RunSpec, done, snapshot, train_run
from arelu_cli.studies.generations import write_human
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError

Say = Callable[[str], None]
SHARED = ("data", "model", "pretrain")
"""The tables every run depends on."""


def relu_name(recipe: Recipe) -> str:
    return f"{recipe.finetune.alpha:g}-relu"


def pretrain_spec(recipe: Recipe, steps: int | None = None, transform: str = "softmax",
                  tau: float | None = None) -> RunSpec:
    p, f = recipe.pretrain, recipe.finetune
    steps = steps or p.steps
    return RunSpec(transform=transform, tau=tau, init=None, seed=p.seed, steps=steps, lr=p.lr,
                   warmup=p.warmup, schedule="cosine_with_min_lr", min_lr_rate=p.min_lr_rate,
                   weight_decay=p.weight_decay, snapshots=(steps,), save_every=f.save_every,
                   log_every=f.log_every, block_size=recipe.data.block_size,
                   max_tokens=recipe.data.max_tokens)


def finetune_spec(recipe: Recipe, out: Path, transform: str, tau: float | None, seed: int,
                  lora: bool = False) -> RunSpec:
    f = recipe.finetune
    adapter = {"r": f.lora_rank, "lora_alpha": f.lora_alpha,
               "lora_dropout": f.lora_dropout} if lora else None
    return RunSpec(transform=transform, tau=tau, init=str(pretrained(recipe, out)), seed=seed,
                   steps=f.steps, lr=f.lora_lr if lora else f.lr, warmup=f.warmup,
                   schedule="linear", min_lr_rate=0.0, weight_decay=f.weight_decay,
                   snapshots=tuple(s for s in f.eval_steps if s > 0), save_every=f.save_every,
                   log_every=f.log_every, block_size=recipe.data.block_size,
                   max_tokens=recipe.data.max_tokens, lora=adapter)


def pretrained(recipe: Recipe, out: Path) -> Path:
    return snapshot(out / "pretrain", recipe.pretrain.steps)


def write_json(path: Path, value: dict) -> None:
    atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def taus(recipe: Recipe, out: Path, data: Prepared) -> dict:
    """``taus.json`` (module docstring), made once."""
    path = out / TAUS
    if path.is_file():
        return read_json(path)
    import torch
    from transformers import LlamaForCausalLM

    from arelu_cli.data.blocks import block_batches
    from arelu_cli.transforms.tau import analytic_tau, empirical_tau, tau_for

    model = LlamaForCausalLM.from_pretrained(pretrained(recipe, out)).eval()
    batch = next(block_batches(data, "train", recipe.data.max_tokens, recipe.data.block_size,
                               seed=recipe.finetune.seeds[0]))
    with torch.no_grad():
        logits = model(input_ids=batch.tgt_in).logits[batch.tgt_out != data.pad_id]  # (N, V)
    alpha = recipe.finetune.alpha
    found = {"tau_for": tau_for(logits, alpha),
             "analytic": analytic_tau(data.vocab_size, d_model=recipe.model.hidden_size,
                                      alpha=alpha).tau,
             "entmax_threshold_mean": empirical_tau(logits, alpha),
             "logit_std": float(logits.double().std()), "rows": int(logits.shape[0])}
    write_json(path, found)
    return found


def step0(recipe: Recipe, out: Path, data: Prepared, name: str, transform: str,
          tau: float | None, say: Say) -> None:
    """Run ``name``'s step 0: the pretrained weights with its transform, evaluated once."""
    folder = out / "runs" / name / "step-0"
    model_dir = pretrained(recipe, out)
    if transform != "softmax":
        model_dir = folder / "model"
        from transformers.utils import CONFIG_NAME   # save_pretrained's model config
        if not (model_dir / CONFIG_NAME).is_file():
            from transformers import LlamaForCausalLM

            from arelu_cli.hf import use_transform

            model = LlamaForCausalLM.from_pretrained(pretrained(recipe, out))
            use_transform(model, transform, tau=tau)
            model.save_pretrained(model_dir)
    evaluate_snapshot(recipe, data, out, model_dir, folder / "eval", recipe.finetune.seeds[0], 0,
                      say)


def evaluate_snapshot(recipe: Recipe, data: Prepared, out: Path, model_dir: Path, folder: Path,
                      seed: int, step: int, say: Say, stride: int | None = None,
                      only_pure: bool = False) -> None:
    """Evaluate the weights in ``model_dir`` into ``folder`` with every decoding of their
    family not evaluated yet (pure sampling alone: ``only_pure``)."""
    from transformers.utils import CONFIG_NAME

    family = "softmax"
    stored = read_json(model_dir / CONFIG_NAME).get("arelu")
    if stored:
        from arelu_cli.registry import get_transform
        family = get_transform(stored["transform"], tau=stored.get("tau") or 0.0).family
    chosen = E.decodings(recipe, family)[:1 if only_pure else None]
    if all(E.paths(folder, d.label())[0].is_file() for d in chosen):
        return
    say(f"evaluating {model_dir} -> {folder}")
    decoder = E.load(model_dir, data, recipe.data.block_size, seed, step,
                     named=model_dir.relative_to(out))
    E.evaluate(decoder, folder, chosen, E.settings(recipe, stride), out)


def train_and_evaluate(recipe: Recipe, data: Prepared, out: Path, folder: Path, spec: RunSpec,
                       say: Say, evaluated: bool = True) -> None:
    if not done(folder):
        train_run(folder, spec, data, recipe.model, say=say)
    for step in spec.snapshots if evaluated else ():
        evaluate_snapshot(recipe, data, out, snapshot(folder, step),
                          folder / "eval" / f"step-{step}", spec.seed, step, say)


def select_tau(recipe: Recipe, out: Path, data: Prepared, tau: float, say: Say) -> dict:
    """Train every grid point to ``grid_steps`` at the first seed and choose on dev."""
    f, chosen = recipe.finetune, selection(out)
    if "tau_dev" in chosen:
        return chosen
    from arelu_cli.util.results import write_rows

    rows, seed = [], f.seeds[0]
    for factor in f.tau_grid:
        folder = out / "runs" / grid_name(factor) / f"seed-{seed}"
        spec = finetune_spec(recipe, out, relu_name(recipe), tau * factor, seed)
        if not snapshot(folder, f.grid_steps).is_dir():
            train_run(folder, spec, data, recipe.model, until=f.grid_steps, say=say)
        decoder = E.load(snapshot(folder, f.grid_steps), data, recipe.data.block_size, seed,
                         f.grid_steps)
        rows.append({"factor": factor, "tau": tau * factor, "steps": f.grid_steps,
                     **E.dev_eps_ppl(decoder, E.settings(recipe))})
        say(f"grid x{factor:g}: dev eps-ppl {rows[-1]['dev_eps_ppl']:.2f}")
    write_rows(rows, out / GRID)
    best = min(rows, key=lambda r: (r["dev_eps_ppl"], abs(r["factor"] - 1)))
    chosen["tau_dev"] = {"factor": best["factor"], "tau": best["tau"],
                         "run": grid_name(best["factor"])}
    write_json(out / SELECTION, chosen)
    return chosen


def select_lora_rule(recipe: Recipe, out: Path, say: Say) -> dict:
    """The tau rule of ``relu-tau_for`` and ``relu-tau_dev`` with the lower dev
    epsilon-perplexity at the last step of the first seed."""
    import pandas as pd

    f, chosen = recipe.finetune, selection(out)
    if "lora" in chosen:
        return chosen
    candidates = {"tau_for": "relu-tau_for"}
    if "relu-tau_dev" in f.arms:
        candidates["tau_dev"] = chosen["tau_dev"]["run"]
    scores = {}
    for rule, run in candidates.items():
        row = E.paths(out / "runs" / run / f"seed-{f.seeds[0]}" / "eval" / f"step-{f.steps}",
                      "sample")[0]
        scores[rule] = float(pd.read_csv(row)["dev_eps_ppl"].iloc[0])
    rule = min(scores, key=lambda r: (scores[r], r != "tau_for"))
    chosen["lora"] = {"rule": rule, "dev_eps_ppl": scores}
    write_json(out / SELECTION, chosen)
    say(f"LoRA takes the {rule} rule (dev eps-ppl {scores})")
    return chosen


def arm_run(recipe: Recipe, out: Path, data: Prepared, arm: str, seed: int, tau: dict,
            say: Say) -> tuple[str, str, float | None, bool]:
    """(run name, transform, tau, lora) of ``arm``, selections made where it needs them."""
    relu, found = relu_name(recipe), tau["tau_for"]
    if arm == "softmax":
        return "softmax", "softmax", None, False
    if arm == "relu-tau_for":
        return "relu-tau_for", relu, found, False
    if arm == "relu-tau_dev":
        chosen = select_tau(recipe, out, data, found, say)["tau_dev"]
        return chosen["run"], relu, chosen["tau"], False
    if arm == "entmax":
        return "entmax", recipe.finetune.entmax, None, False
    if arm == "relu-analytic":
        return "relu-analytic", relu, tau["analytic"], False
    chosen = select_lora_rule(recipe, out, say)
    rule = chosen["lora"]["rule"]
    return "relu-lora", relu, found if rule == "tau_for" else chosen["tau_dev"]["tau"], True


def check_record(recipe: Recipe, out: Path) -> None:
    """Refuse a recipe whose :data:`SHARED` tables differ from those ``recipe.json`` keeps;
    then keep the recipe's."""
    record, tables = out / RECIPE, recipe.to_dict()
    if record.is_file():
        before = read_json(record)
        changed = [t for t in SHARED if before.get(t) != tables[t]]
        if changed:
            raise UserError(f"{out} was made with other {', '.join(f'[{t}]' for t in changed)} "
                            f"({record}): every run depends on them; use another --out or "
                            "restore the recipe")
    write_json(record, tables)


def progress(out: Path, context: Context) -> Say:
    """Each line to the console and to ``driver.log``, time-stamped."""
    def say(line: str) -> None:
        stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"
        context.console.print(escape(stamped), highlight=False, soft_wrap=True)
        with (out / LOG).open("a", encoding="utf-8") as f:
            f.write(stamped + "\n")
    return say


def stages(recipe: Recipe, out: Path, context: Context) -> None:
    """Every stage, in order (module docstring)."""
    import torch

    out = out.resolve()   # the runs' records name the pretrained weights by this path
    check_record(recipe, out)
    if recipe.study.threads:
        torch.set_num_threads(recipe.study.threads)
    say = progress(out, context)
    say(f"start: {context.command or context.recipe} threads {torch.get_num_threads()}")
    data = load_prepared(recipe.data.path)
    if data.task != "lm":
        raise UserError(f"{data.path} is not a language-modelling corpus; give [data] path a "
                        "folder of arelu prepare ptb (or another language-modelling corpus)")
    write_human(out, recipe.data.path, recipe.eval.prefix_tokens, recipe.eval.prompts)
    # evaluated as the control's step 0 (runs/softmax/step-0)
    train_and_evaluate(recipe, data, out, out / "pretrain", pretrain_spec(recipe), say,
                       evaluated=False)
    evaluate_snapshot(recipe, data, out, pretrained(recipe, out), out / "pretrain" / "eval-ppl",
                      recipe.pretrain.seed, recipe.pretrain.steps, say,
                      stride=recipe.pretrain.ppl_stride, only_pure=True)
    tau = taus(recipe, out, data)
    say(f"taus: {tau}")
    for seed in recipe.finetune.seeds:
        for arm in recipe.finetune.arms:
            name, transform, value, lora = arm_run(recipe, out, data, arm, seed, tau, say)
            if not lora:
                step0(recipe, out, data, name, transform, value, say)
            spec = finetune_spec(recipe, out, transform, value, seed, lora)
            train_and_evaluate(recipe, data, out, out / "runs" / name / f"seed-{seed}", spec,
                               say)
        context.report()
    if recipe.reference.scratch:
        steps = recipe.pretrain.steps + recipe.finetune.steps
        spec = pretrain_spec(recipe, steps, relu_name(recipe), tau["analytic"])
        train_and_evaluate(recipe, data, out, out / "runs" / "scratch" / f"seed-{spec.seed}",
                           spec, say)
    say("study finished")
