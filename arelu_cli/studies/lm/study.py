"""The language-model study (``[study] kind = "lm"``, ``arelu study RECIPE``): open-ended
generation with sparse output layers, a plan over the experiment core
(:mod:`arelu_cli.studies.core`), resumable, step-budgeted.

The paper motivates alpha-ReLU with unconstrained sampling from a language model and leaves
its evaluation there to future work. Per ``[lm_study] transforms`` entry:

1. **sweep**: one run per ``[sweep] lr`` value for ``[lm_study] sweep_steps`` steps at seed
   ``[train] seed`` (``runs/NAME/POINT/``), selected on its own dev loss (the best
   validation; transforms are never compared on each other's loss), written to
   ``selected.json`` (:func:`arelu_cli.studies.sweep.sweep`);
2. **seeds**: the selected configuration at every ``[study] seeds`` for ``[train]
   max_steps`` steps (``seeds/NAME/seed-S/``); the ``[train] seed`` one continues a copy of
   the selected sweep run (the Noam schedule does not depend on the budget, so that is the
   run a fresh one would be), the sweep's own run left as it was selected;
3. **evaluate**, as soon as a seed run is trained: ``arelu lm-eval`` of its last step's weights
   for every ``[lm_study] decodings`` entry its transform allows, on the first ``prompts``
   test prompts: ``lm_eval/DECODING.csv`` (one row), ``generations/DECODING.txt`` with its
   record and ``generations/DECODING.tokens.json`` (the continuations' token ids), and once
   per study the human continuations' ids (``human.tokens.json``), so that every table is
   recomputed from committed files. For alpha-ReLU, "a tau from the sweep on dev": the
   ``[train] seed`` model's dev epsilon-perplexity at each ``[lm_study] tau_shifts``
   decode-time shift of tau (``tau_sweep.csv``); the best gives every seed one more decoding,
   ``sample-tau_dev``;
4. **report** (:mod:`arelu_cli.studies.lm.report`): the tables, the paired bootstrap over
   test prompts (:mod:`arelu_cli.studies.lm.bootstrap`) and ``REPORT.md``.

The stages run transform by transform, in the order of ``[lm_study] transforms`` (its sweep,
its seeds, their evaluations, then the report of what is finished), so that a study stopped
early leaves whole transforms, each tuned and at every seed, rather than every transform at
one seed. Every stage is skipped where its outputs are newer than the weights they came
from: run the same command again to continue.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from arelu_cli.config import Config
from arelu_cli.model import checkpoint
from arelu_cli.registry import get_transform
from arelu_cli.studies.contract import Context, Study
from arelu_cli.studies.core import (Run, Task, check_budget, check_runs, done, output,
                                    run_config, tolerant, train_and_make)
from arelu_cli.studies.generations import write_human, write_tokens
from arelu_cli.studies.lm import report
from arelu_cli.studies.lm.bootstrap import SIG_COLUMNS
from arelu_cli.studies.lm.report import SUMMARY_COLUMNS
from arelu_cli.studies.lm.runs import BENCH, TAU_SWEEP, TUNED, selected_shift
from arelu_cli.studies.sweep import Point, continue_copy, record_selection, study_run, sweep
from arelu_cli.train import run_dir
from arelu_cli.train.loop import snapshot_path
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json


def decoding(label: str):
    """The :class:`~arelu_cli.decode.sampling.Decoding` of a ``[lm_study] decodings`` entry."""
    from arelu_cli.decode.sampling import Decoding

    try:
        return Decoding.from_label(label)
    except ValueError as err:
        raise UserError(f"[lm_study] decodings: {err}") from None


def decodings_of(config: Config, name: str) -> list[str]:
    """The ``[lm_study] decodings`` the study gives transform ``name``: those the sampler
    takes for it, less truncation (top-k, top-p) for a sparse transform, which the study
    samples from its own support (Martins et al., 2020: nucleus sampling is the dense
    model's remedy it is compared with)."""
    transform = get_transform(name)
    found = []
    for label in config.lm_study.decodings:
        try:
            chosen = decoding(label).check(transform)
        except ValueError:
            continue
        if transform.sparse and (chosen.top_k is not None or chosen.top_p is not None):
            continue
        found.append(label)
    return found


def sweep_config(config: Config) -> Config:
    """The recipe as the sweep trains it: ``[lm_study] transforms`` tuned, for
    ``sweep_steps`` steps."""
    s = config.lm_study
    return dataclasses.replace(run_config(config, max_steps=s.sweep_steps),
                               sweep=dataclasses.replace(config.sweep, transforms=s.transforms))


def check(config: Config) -> None:
    """Refuse a study that could not give its tables, before any training."""
    s, t = config.lm_study, config.train
    if config.data.task != "lm":
        raise UserError("the language-model study needs a language-model recipe ([data] task = "
                        "\"lm\"), and this one is a translation recipe; e.g. recipes/"
                        "ptb-lm-study.toml")
    check_budget(config, "an LM study")
    if not s.transforms:
        raise UserError("[lm_study] transforms is empty; name at least one, e.g. [\"softmax\"]")
    for name in s.transforms:
        get_transform(name)
    if s.baseline not in s.transforms:
        raise UserError(f"[lm_study] baseline {s.baseline!r} is not a transform the study "
                        f"trains ({', '.join(s.transforms)}); name one of them")
    for label in s.decodings:
        decoding(label)
    if s.reference not in decodings_of(config, s.baseline):
        raise UserError(f"[lm_study] reference {s.reference!r} is not a decoding the study runs "
                        f"for {s.baseline} ({', '.join(decodings_of(config, s.baseline))}); "
                        "add it to [lm_study] decodings")
    if not 0 < s.sweep_steps <= t.max_steps or s.sweep_steps % t.keep_every:
        raise UserError(f"[lm_study] sweep_steps ({s.sweep_steps}) must be a multiple of [train] "
                        f"keep_every ({t.keep_every}) and at most max_steps ({t.max_steps})")
    if not config.study.seeds or t.seed not in config.study.seeds:
        raise UserError(f"[study] seeds must include [train] seed ({t.seed}): its run continues "
                        "the sweep's selected run")
    for name, value in (("prompts", s.prompts), ("stride", s.stride)):
        if value < 0:
            raise UserError(f"[lm_study] {name} must be >= 0, got {value}")
    for name, value in (("prefix_tokens", s.prefix_tokens),
                        ("max_new_tokens", s.max_new_tokens),
                        ("bootstrap_samples", s.bootstrap_samples)):
        if value < 1:
            raise UserError(f"[lm_study] {name} must be at least 1, got {value}")


def seed_run(config: Config, out: Path, name: str, point: Point, seed: int) -> Run:
    return study_run(config, out, name, point, seed,
                     folder=out / "seeds" / name / f"seed-{seed}")


def settings(config: Config):
    """What ``lm-eval`` measures every model on."""
    from arelu_cli.analysis.lm_eval import EvalSettings

    s = config.lm_study
    return EvalSettings(split="test", dev_split="dev", prefix_tokens=s.prefix_tokens,
                        max_prompts=s.prompts, max_tokens=s.max_new_tokens, seed=s.gen_seed,
                        stride=s.stride)


def output_paths(folder: Path, label: str) -> tuple[Path, Path, Path]:
    """A seed run's row, generations and generated token ids for one decoding."""
    gen = folder / "generations" / f"{label}.txt"
    return folder / "lm_eval" / f"{label}.csv", gen, gen.with_suffix(".tokens.json")


def tau_sweep_rows(decoder, shifts, measured) -> list[dict]:
    """Dev epsilon-perplexity (and support) of alpha-ReLU sampling at each decode-time shift
    of tau, eps tuned on dev for each (:func:`arelu_cli.analysis.lm_metrics.tune_eps`)."""
    from arelu_cli.analysis import lm_eval, lm_metrics as M
    from arelu_cli.decode.sampling import Decoding

    vocab, t, rows = decoder.data.vocab_size, decoder.transform, []
    for shift in shifts:
        values = lm_eval.step_values(decoder, measured.dev_split, Decoding(tau_shift=shift),
                                     measured)
        eps, dev_eps_ppl = M.tune_eps(values["p_target"], vocab)
        found = M.summarize(values, vocab, eps)
        rows.append({"transform": t.name, "seed": decoder.config.train.seed, "tau": t.tau,
                     "tau_shift": shift, "split": measured.dev_split, "dev_eps_ppl": dev_eps_ppl,
                     "eps": eps, "sp": found["sp"], "jsd": found["jsd"],
                     "zero_share": found["zero_share"], "support_mean": found["support_mean"]})
    return rows


def check_made(run: Run) -> None:
    """Refuse, in one line naming the setting, an evaluation of ``run`` made with other
    ``[lm_study]`` settings than the recipe's now: its row would be reported as made with
    them."""
    from arelu_cli.util.results import read_table

    s = run.config.lm_study
    stride = s.stride or run.config.data.block_size
    wanted = {"prefix_tokens": s.prefix_tokens, "stride": stride, "gen_seed": s.gen_seed}
    for path in sorted((run.folder / "lm_eval").glob("*.csv")):
        row = read_table(path, run_dir.again(run.folder)).iloc[0]
        meta = read_json(output_paths(run.folder, path.stem)[1].with_suffix(".txt.json"),
                         run_dir.again(run.folder))
        found = {k: int(row[k]) for k in wanted} | {"max_new_tokens": meta.get("max_tokens")}
        for key, value in (wanted | {"max_new_tokens": s.max_new_tokens}).items():
            if found[key] != value:
                raise UserError(f"{path} was made with [lm_study] {key} = {found[key]}, but the "
                                f"recipe now says {value}; set it back, or delete {path} to "
                                "evaluate again")
    sweep = run.folder / TAU_SWEEP
    if sweep.is_file():
        tried = tuple(read_table(sweep, run_dir.again(run.folder))["tau_shift"])
        if tried != tuple(s.tau_shifts):
            raise UserError(f"{sweep} tried tau shifts {list(tried)}, but [lm_study] tau_shifts "
                            f"is now {list(s.tau_shifts)}; set it back, or delete {sweep} to "
                            "sweep again")


def outputs(run: Run, out: Path, tuning: Path | None = None) -> list[Task]:
    """Every decoding's evaluation of the run's last step (one checkpoint load for all); for
    alpha-ReLU with ``[lm_study] tau_shifts``, also sampling at the tau shift selected in
    ``tuning`` (the ``[train] seed`` run's folder, whose tau sweep this run makes if it is that
    run). Each row names the checkpoint and the generations by their paths in the study
    folder ``out``."""
    from arelu_cli.analysis import lm_eval
    from arelu_cli.decode.generate import write_generation
    from arelu_cli.decode.translate import open_checkpoint
    from arelu_cli.decode.sampling import Decoding
    from arelu_cli.util.results import write_rows

    weights = snapshot_path(run.folder, run.steps)
    measured = settings(run.config)
    shifts = run.config.lm_study.tau_shifts if get_transform(run.name).family == "relu" else ()

    @functools.cache
    def decoder():
        return open_checkpoint(weights, None, run.config.train.device, task="lm")

    def make(label: str) -> None:
        row_path, gen_path, ids_path = output_paths(run.folder, label)
        chosen = Decoding(tau_shift=selected_shift(tuning)) if label == TUNED else decoding(label)
        named = dataclasses.replace(decoder(), path=weights.relative_to(out))
        row, generated = lm_eval.evaluate(named, chosen, measured, gen_path.relative_to(out))
        row["decoding"] = label  # the shift itself is in the signature
        write_generation(generated, gen_path)
        write_tokens(ids_path, generated.tokens)
        lm_eval.merge_rows([row], row_path)  # last: its presence says the decoding is done

    def sweep_tau() -> None:
        write_rows(tau_sweep_rows(decoder(), shifts, measured), run.folder / TAU_SWEEP)

    labels = decodings_of(run.config, run.name) + ([TUNED] if shifts and tuning else [])
    made = [output(output_paths(run.folder, label)[::-1], weights, functools.partial(make, label))
            for label in labels]
    if shifts and tuning == run.folder:
        made.insert(0, output((run.folder / TAU_SWEEP,), weights, sweep_tau))
    return made


def plan(config: Config, out: Path, name: str, point: Point) -> list[Run]:
    """Transform ``name``'s seed runs at its selected ``point``, the ``[train] seed`` first."""
    first = config.train.seed
    seeds = [first] + [s for s in config.study.seeds if s != first]
    return [seed_run(config, out, name, point, seed) for seed in seeds]


def stages(config: Config, out: Path, context: Context) -> None:
    """Every stage, transform by transform (module docstring), the report of what is
    finished written after each."""
    console = context.console
    train = tolerant(context.train, console)
    s = config.lm_study
    write_human(out, config.data.path, s.prefix_tokens, s.prompts)
    tuned = sweep_config(config)
    selected: dict[str, Point] = {}
    for name in config.lm_study.transforms:
        alone = dataclasses.replace(tuned, sweep=dataclasses.replace(tuned.sweep,
                                                                     transforms=[name]))
        selected |= sweep(alone, out, train, console)
        record_selection(tuned, out, selected, console, partial=True)
        runs = plan(config, out, name, selected[name])
        check_runs(runs)
        for run in runs:
            check_made(run)
        tuning = runs[0].folder
        for run in runs:
            made = outputs(run, out, tuning)
            if run.seed == config.train.seed and not done(run, [p for o in made
                                                                for p in o.paths]):
                source = study_run(tuned, out, name, selected[name], run.seed).folder
                if (source / checkpoint.LAST).is_file():
                    continue_copy(source, run.folder)
            train_and_make(run, train, console, made)
        context.report()


OUTPUTS = {"lm_eval.csv": "run", "summary.csv": SUMMARY_COLUMNS[0],
           "significance.csv": SIG_COLUMNS[0], "sweep.csv": "transform",
           "dev_curves.csv": "transform", BENCH: "transform"}
"""The study's tables and the first column of each (what a file of ours starts with)."""
STUDY = Study("lm", check, stages, report.tables, report.claims, report.document, OUTPUTS,
              ("summary.png", "dev_curves.png"))
