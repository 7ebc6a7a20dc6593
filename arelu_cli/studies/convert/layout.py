"""The conversion study's folder (:mod:`~arelu_cli.studies.convert.stages` makes it): its file
names, which run each arm is (:func:`arm_runs`: the selections made on dev decide two of
them) and what the study has not made yet (:func:`missing_lines`)."""

from __future__ import annotations

from pathlib import Path

from arelu_cli.studies.convert.evaluate import decodings
from arelu_cli.studies.convert.recipe import Recipe
from arelu_cli.train import run_dir
from arelu_cli.util.results import read_json

RECIPE, TAUS, SELECTION, GRID, LOG = ("recipe.json", "taus.json", "selection.json", "grid.csv",
                                      "driver.log")
PURE = "sample"


def grid_name(factor: float) -> str:
    """The run of the tau grid at ``factor`` times ``tau_for`` (1: ``relu-tau_for`` itself)."""
    return "relu-tau_for" if factor == 1 else f"relu-x{factor:g}"


def selection(out: Path) -> dict:
    """``selection.json`` (empty before the grid has chosen)."""
    path = out / SELECTION
    return read_json(path, f"delete it and {GRID} to choose again") if path.is_file() else {}


def lora_rule(out: Path) -> str | None:
    """The arm whose tau rule LoRA took (``relu-tau_for`` or ``relu-tau_dev``); None before
    it is chosen."""
    rule = selection(out).get("lora", {}).get("rule")
    return None if rule is None else f"relu-{rule}"


def arm_runs(recipe: Recipe, out: Path) -> dict[str, tuple[str, str]]:
    """Arm -> (its run's name, the run whose step 0 it shares), for the recipe's arms whose
    run is known: ``relu-tau_dev`` once the grid chose, ``relu-lora`` once its rule is."""
    chosen, found = selection(out), {}
    tau_dev = chosen.get("tau_dev", {}).get("run")
    for arm in recipe.finetune.arms:
        run = tau_dev if arm == "relu-tau_dev" else arm
        start = run
        if arm == "relu-lora":
            rule = lora_rule(out)
            start = None if rule is None else "relu-tau_for" if rule == "relu-tau_for" else \
                tau_dev
        if run is not None and start is not None:
            found[arm] = (run, start)
    return found


def _labels(recipe: Recipe, arm: str) -> list[str]:
    """The decodings an arm's evaluation makes (softmax at each nucleus p, others purely:
    :func:`~arelu_cli.studies.convert.evaluate.decodings`)."""
    return [d.label() for d in decodings(recipe, "softmax" if arm == "softmax" else "sparse")]


def _evaluated(folder: Path, labels: list[str]) -> bool:
    return all((folder / f"{label}.csv").is_file() for label in labels)


def _run_lines(what: str, folder: Path, steps: list[int], labels: list[str]) -> list[str]:
    """What run ``folder`` lacks: training, and its evaluations at ``steps``."""
    if not run_dir.config_path(folder).is_file():
        return [f"{what}: not trained yet"]
    lacking = [str(s) for s in steps if not _evaluated(folder / "eval" / f"step-{s}", labels)]
    state = ([] if run_dir.finished(folder) else ["still training"]) + (
        [f"step {', '.join(lacking)} not evaluated"] if lacking else [])
    return [f"{what}: {'; '.join(state)}"] if state else []


def missing_lines(recipe: Recipe, out: Path) -> list[str]:
    """One line per part of the plan not made yet, and per seed folder the recipe leaves
    out; none for a finished study."""
    f, lines = recipe.finetune, []
    if not run_dir.finished(out / "pretrain"):
        lines.append("pretrain: " + ("still training" if run_dir.config_path(
            out / "pretrain").is_file() else "not trained yet"))
    if not _evaluated(out / "pretrain" / "eval-ppl", [PURE]):
        lines.append("pretrain/eval-ppl: the pretrained model's test perplexity not measured yet")
    if not (out / TAUS).is_file():
        lines.append(f"{TAUS}: tau of the pretrained logits not computed yet")
    arms, steps = arm_runs(recipe, out), [s for s in f.eval_steps if s > 0]
    for arm in f.arms:
        if arm not in arms:
            why = ("tau not chosen on dev yet" if arm == "relu-tau_dev"
                   else "its tau rule not chosen on dev yet")
            lines.append(f"{arm}: {why} ({SELECTION}), so none of its runs is measured")
            continue
        run, start = arms[arm]
        if not _evaluated(out / "runs" / start / "step-0" / "eval", _labels(recipe, arm)):
            lines.append(f"{arm} step 0: not evaluated yet")
        for seed in f.seeds:
            lines += _run_lines(f"{arm} seed {seed}", out / "runs" / run / f"seed-{seed}",
                                steps, _labels(recipe, arm))
        for folder in sorted((out / "runs" / run).glob("seed-*")):
            if folder.name not in {f"seed-{s}" for s in f.seeds}:
                lines.append(f"{folder.relative_to(out)} is left out: [finetune] seeds "
                             f"({', '.join(map(str, f.seeds))}) do not include it")
    if recipe.reference.scratch:
        total = recipe.pretrain.steps + f.steps
        lines += _run_lines("scratch reference", out / "runs" / "scratch" /
                            f"seed-{recipe.pretrain.seed}", [total], [PURE])
    return lines
