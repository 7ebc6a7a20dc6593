"""The language-model study's paired bootstrap over test prompts: each transform x decoding
against the reference system on every statistic of
:data:`~arelu_cli.studies.generations.STATS` and its distance to human, by the bootstrap that
every study sampling language models shares (:mod:`arelu_cli.studies.generations`: the draw,
the cluster over seeds, the statistics recomputed from the committed token ids, which must
equal the ``lm-eval`` rows')."""

from __future__ import annotations

from pathlib import Path

from arelu_cli.analysis.significance import RESAMPLES
from arelu_cli.studies.core import Run
from arelu_cli.studies.generations import (HUMAN, TEST_COLUMNS, Measured, bootstrap_row,
                                           check_against_row, measure, read_tokens,
                                           resample_counts, sides)
from arelu_cli.studies.lm.runs import eval_path, label, measure_again

SIG_COLUMNS = ("transform", "label", "decoding", "baseline", "reference", *TEST_COLUMNS)


def significance_rows(out: Path, runs: list[Run], evals: list[dict], baseline: str,
                      reference: str, samples: int = RESAMPLES) -> list[dict]:
    """Each transform x decoding against ``baseline`` x ``reference`` on every statistic and
    its gap to human (module docstring); none while the reference or ``human.tokens.json``
    is missing. Point estimates are recomputed from the token ids and must equal the
    ``lm-eval`` rows'."""
    if not any(e["transform"] == baseline and e["decoding"] == reference for e in evals) or \
            not (out / HUMAN).is_file():
        return []
    again_human = "restore it, or delete it to write it again"
    human_tokens = read_tokens(out / HUMAN, None, again_human)
    counts = resample_counts(len(human_tokens), samples)
    human = measure(human_tokens, counts)
    for e in evals:
        check_against_row(human, e, out / HUMAN, again_human, prefix="human_")
    by_run = {(r.name, r.seed): r for r in runs}
    systems: dict[tuple[str, str], dict[int, Measured]] = {}
    for e in evals:
        run = by_run[e["transform"], int(e["seed"])]
        path = run.folder / "generations" / f"{e['decoding']}.tokens.json"
        remedy = measure_again(eval_path(run, e["decoding"]))
        measured = measure(read_tokens(path, len(human_tokens), remedy), counts)
        check_against_row(measured, e, path, remedy)
        systems.setdefault((e["transform"], e["decoding"]), {})[run.seed] = measured
    ref = sides(baseline, reference, systems[baseline, reference], human)
    return [{"transform": name, "label": label(name), "decoding": decoding,
             "baseline": baseline, "reference": reference,
             **bootstrap_row(side, ref[stat], stat, human.point[stat.removesuffix("_gap")],
                             len(human_tokens), samples)}
            for (name, decoding), seeds in systems.items()
            for stat, side in sides(name, decoding, seeds, human).items()]
