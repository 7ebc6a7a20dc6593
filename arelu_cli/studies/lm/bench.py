"""``arelu bench lm-study D``: quiet ms per generated token of a language-model study's own
models, written to ``D/bench_generate.csv``, which the study's report
(:mod:`arelu_cli.studies.lm.report`) reads for its speed verdict and ms/token column.

Per ``[lm_study] transforms`` model trained so far (``D/seeds/NAME/seed-S/``, the lowest
seed whose last-step weights exist: the weights ``lm-eval`` evaluates; or the weights given
for NAME, ``--weights NAME=PATH``: a retrain of one of its seed runs whose checkpoints are
gone, checked to be of that run's settings and last step), every decoding the
study runs for it (:func:`arelu_cli.studies.lm.study.decodings_of`; for alpha-ReLU also
``sample-tau_dev`` once the tau sweep on dev exists), on the first test prompts of the
study's ``prefix_tokens``, at each batch size: the full model and the output layer alone,
interleaved, with paired ratios to the softmax model's pure and nucleus sampling
(:mod:`arelu_cli.bench.lm`). Each row names its checkpoint by its path relative to ``D``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from arelu_cli.config import from_dict
from arelu_cli.registry import get_transform
from arelu_cli.studies.contract import read_record
from arelu_cli.studies.lm.runs import (BENCH, SAMPLE, TAU_SWEEP, TUNED, seed_runs,
                                       selected_shift)
from arelu_cli.studies.lm.study import decoding, decodings_of
from arelu_cli.train.loop import snapshot_path
from arelu_cli.train.run_dir import read_config
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import write_rows

TRAIN = "arelu study RECIPE --out {out}"


@dataclass(frozen=True)
class BenchPlan:
    """What ``arelu bench lm-study`` times (module docstring)."""

    batches: tuple[int, ...] = (1, 32)
    new_tokens: int | None = None
    """New tokens per timing; None: the study's ``[lm_study] max_new_tokens``."""
    repeats: int = 5
    device: str = "auto"
    seed: int = 0
    weights: tuple[tuple[str, Path], ...] = ()
    """``(NAME, checkpoint)``: time these weights for transform NAME instead of its seed
    runs' (:func:`given_weights`)."""


def check_plan(plan: BenchPlan) -> None:
    for name, value in (("--new-tokens", plan.new_tokens), ("--repeats", plan.repeats)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    if not plan.batches or min(plan.batches) < 1:
        raise UserError(f"--batches must list positive batch sizes, e.g. 1,32; got "
                        f"{list(plan.batches)}")


def parse_weights(items: list[str]) -> tuple[tuple[str, Path], ...]:
    """``["softmax=runs/x/steps/step-2000.pt"]`` -> ``(("softmax", Path(...)),)``."""
    found = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--weights {item!r} is not NAME=PATH, e.g. "
                            "softmax=retrain/steps/step-2000.pt")
        found.append((name, Path(path)))
    names = [name for name, _ in found]
    if len(set(names)) < len(names):
        raise UserError(f"--weights names a transform twice ({', '.join(names)}); give one "
                        "checkpoint per transform")
    return tuple(found)


def given_weights(out: Path, name: str, path: Path) -> tuple[int, Path]:
    """``(seed, path)`` for weights given for transform ``name``: a checkpoint of the study's
    seed run ``seeds/NAME/seed-S/`` retrained (its settings but where and how fast it ran,
    :data:`~arelu_cli.train.run_record.NOT_SHAPING`; its last step), e.g. after the run's own
    checkpoints were deleted; anything else is refused in one line."""
    from arelu_cli.model import checkpoint
    from arelu_cli.train.run_dir import config_path
    from arelu_cli.train.run_record import NOT_SHAPING, differences, show

    ckpt = checkpoint.load(path)
    if not isinstance(ckpt.get("config"), dict):
        raise UserError(f"{path} holds no configuration; give a checkpoint that arelu train "
                        "wrote")
    seed = int(ckpt["config"].get("train", {}).get("seed", 0))
    folder = out / "seeds" / name / f"seed-{seed}"
    record = read_config(folder)
    if record is None:
        raise UserError(f"--weights {name}={path}: its seed {seed} has no run in the study "
                        f"({config_path(folder)} is missing); give a retrain of one of "
                        f"{name}'s seed runs")
    changed = {k: v for k, v in differences(record, ckpt["config"]).items()
               if k not in NOT_SHAPING}
    if changed:
        key, (theirs, mine) = next(iter(changed.items()))
        raise UserError(f"--weights {name}={path} was trained with {key} = {show(mine)}, but "
                        f"the study's run {folder} with {show(theirs)}; retrain with that "
                        "run's settings (its config.json)")
    steps = record.get("train", {}).get("max_steps")
    if ckpt.get("step") != steps:
        raise UserError(f"--weights {name}={path} holds step {ckpt.get('step')}, not the "
                        f"run's last step {steps}; give its steps/step-{steps}.pt")
    return seed, Path(path)


def trained_weights(out: Path, given: tuple[tuple[str, Path], ...] = ()
                    ) -> dict[str, tuple[int, Path]]:
    """Per transform, its lowest seed whose last-step weights exist, and those weights; or
    the weights ``given`` for it (:func:`given_weights`)."""
    kind, tables = read_record(out)
    if kind != "lm":
        raise UserError(f"{out} is a {kind} study's folder, not a language-model study's; give "
                        "the --out folder of arelu study on an LM study recipe")
    config = from_dict(tables)
    found: dict[str, tuple[int, Path]] = {name: given_weights(out, name, path)
                                          for name, path in given}
    for run in sorted(seed_runs(config, out)[0], key=lambda r: r.seed):
        weights = snapshot_path(run.folder, run.steps)
        if weights.is_file() and run.name not in found:
            found[run.name] = (run.seed, weights)
    if not found:
        raise UserError(f"no trained seed model in {out / 'seeds'} yet (seeds/NAME/seed-S/steps/"
                        f"step-MAX.pt); train them with {TRAIN.format(out=out)}")
    return found


def tuned_shift(out: Path, name: str) -> float | None:
    """The dev-selected tau shift of alpha-ReLU model ``name``, once its tau sweep exists."""
    if get_transform(name).family != "relu":
        return None
    sweeps = sorted((out / "seeds" / name).glob(f"seed-*/{TAU_SWEEP}"))
    return selected_shift(sweeps[0].parent) if sweeps else None


def _open(out: Path, weights: Path, device: str, first):
    """``weights`` opened for decoding, named by its path relative to the study folder
    ``out``; a vocabulary other than ``first``'s is refused."""
    from arelu_cli.model.checkpoint import vocab_checksum
    from arelu_cli.decode.translate import open_checkpoint

    decoder = open_checkpoint(weights, None, device, task="lm")
    if first is not None and vocab_checksum(decoder.data) != vocab_checksum(first.data):
        raise UserError(f"{weights} is a model of another vocabulary ({decoder.data.path}) than "
                        f"{first.path} ({first.data.path}); an LM study's models share one "
                        "prepared corpus: move that run out of the study folder")
    return dataclasses.replace(decoder, path=Path(os.path.relpath(weights, out)))


def models(out: Path, device: str, given: tuple[tuple[str, Path], ...] = ()):
    """Every model x decoding to time (:class:`arelu_cli.bench.lm.Timed`), the
    first model's decoder first."""
    from arelu_cli.bench.lm import Timed
    from arelu_cli.decode.sampling import Decoding

    timed, first = [], None
    for name, (seed, weights) in sorted(trained_weights(out, given).items()):
        decoder = _open(out, weights, device, first)
        first = first or decoder
        labels = [(label, decoding(label)) for label in decodings_of(decoder.config, name)]
        shift = tuned_shift(out, name)
        if shift is not None:
            labels.append((TUNED, Decoding(tau_shift=shift)))
        timed += [Timed(decoder, label, chosen, seed) for label, chosen in labels]
    return timed


def prompts_and_steps(timed, plan: BenchPlan) -> tuple[list[list[int]], int]:
    """The study's test prompts (token ids) and the new tokens per timing, checked against
    the models' positions."""
    from arelu_cli.decode.generate import split_prompts

    decoder = timed[0].decoder
    s = decoder.config.lm_study
    prompts, _ = split_prompts(decoder.data, "test", s.prefix_tokens)
    steps = plan.new_tokens or s.max_new_tokens
    room = min(t.decoder.model.cfg.max_positions for t in timed) - s.prefix_tokens
    if steps > room:
        raise UserError(f"--new-tokens {steps} does not fit: the models hold "
                        f"{room + s.prefix_tokens} positions and the prompts take "
                        f"{s.prefix_tokens}; give --new-tokens {room} or fewer")
    return prompts[:max(plan.batches)], steps


def bench_study(out: Path, plan: BenchPlan, csv: Path | None = None, log=None) -> pd.DataFrame:
    """Time every model x decoding of the study ``out`` at every batch size of ``plan``;
    the CSV (default ``out/bench_generate.csv``) is written once, atomically, at the end."""
    from arelu_cli.bench.lm import Measure, batch_rows

    check_plan(plan)
    out = Path(out)
    timed = models(out, plan.device, plan.weights)
    prompts, steps = prompts_and_steps(timed, plan)
    reference = timed[0].decoder.config.lm_study.reference
    measure = Measure(steps, plan.repeats, plan.seed, ("softmax", SAMPLE),
                      ("softmax", reference))
    rows = [row for batch in plan.batches
            for row in batch_rows(timed, prompts, batch, measure, log)]
    return write_rows(rows, csv or out / BENCH)
