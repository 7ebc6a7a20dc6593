"""The language-model study's report (:mod:`arelu_cli.studies.lm.report`) on tiny fake study
folders of the contract's shape, written here: point estimates equal the lm-eval rows', the
bootstrap against a brute-force one, identical systems differ by 0 (p = 1), a repetitive one
significantly, summaries equal pandas', missing runs are reported, bad files are one line."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.analysis.lm_eval import COLUMNS
from arelu_cli.analysis.significance import interval95, p_value
from arelu_cli.config import load_config
from arelu_cli.studies.contract import write_record
from arelu_cli.studies.generations import resample_counts
from arelu_cli.studies.lm.runs import TAU_SWEEP, TUNED, label
from arelu_cli.studies.runner import report as rebuild
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import png_ours

PROMPTS, VOCAB = 20, 40
CORPUS = "ptb"
REF = ("softmax", "sample-top_p0.9")
SELECTED = {"softmax": {"lr": 0.4, "warmup": 400, "label_smoothing": 0.0,
                        "run": "lr-0.4_warmup-400_ls-0"},
            "1.5-relu": {"lr": 0.8, "warmup": 400, "label_smoothing": 0.0,
                         "run": "lr-0.8_warmup-400_ls-0"}}


def texts(seed: int, repetitive: bool = False) -> list[list[int]]:
    """Continuations of the fake prompts; ``repetitive``: each a short phrase over and over
    (it ends in a loop, few distinct bigrams)."""
    rng = random.Random(seed)
    if repetitive:
        return [[rng.randrange(VOCAB) for _ in range(3)] * 5 for _ in range(PROMPTS)]
    return [[rng.randrange(VOCAB) for _ in range(rng.randrange(4, 16))] for _ in range(PROMPTS)]


HUMAN = texts(1000)
TEACHER = {("softmax", "sample"): (110.0, 0.55, 0.30), ("softmax", "sample-top_p0.9"):
           (130.0, 0.54, 0.31), ("1.5-relu", "sample"): (125.0, 0.60, 0.32),
           ("1.5-relu", "greedy"): (400.0, 0.5, 0.4), ("1.5-entmax-k100", "sample"):
           (118.0, 0.59, 0.31), ("1.5-relu", "sample-tau_dev"): (125.0, 0.60, 0.32)}
"""(eps_ppl, sp, jsd) of each system; seeds add to them (see :func:`eval_row`)."""


def eval_row(name: str, decoding: str, seed: int, tokens: list[list[int]]) -> dict:
    """An lm-eval row as ``arelu lm-eval`` makes it: text statistics by lm_metrics."""
    stats, human = M.text_stats(tokens), M.text_stats(HUMAN)
    eps_ppl, sp, jsd = TEACHER[name, decoding]
    row = dict.fromkeys(COLUMNS)
    row |= {"checkpoint": f"seeds/{name}/seed-{seed}/best.pt", "transform": name, "seed": seed,
            "decoding": decoding, "split": "test", "stride": 128,
            "eps": 1e-3 if (name, decoding, seed) == ("1.5-relu", "greedy", 1) else 1e-5,
            "eps_ppl": eps_ppl + 3 * seed ** 2, "sp": sp + 0.01 * seed, "jsd": jsd - 0.01 * seed,
            "ppl": (eps_ppl + 2 * seed) if name == "softmax" else None, "rep_32": 0.2 + seed / 100,
            **stats, **M.distance_to_human(stats, human),
            **{f"human_{k}": v for k, v in human.items()}, "prompts": PROMPTS,
            "generations": f"generations/{decoding}.txt",
            "signature": f"transform:{name}|data:{CORPUS}"}
    return row


def write_report(out: Path, samples: int = 1000, seeds: list[int] | None = None,
                 transforms: list[str] | None = None) -> Path:
    """The study's record (``[lm_study] transforms`` and ``[study] seeds``: those of the
    folder unless given), then ``arelu report``."""
    found = sorted({p.parent.name for p in out.glob("seeds/*/seed-*")}
                   | {p.name for p in out.glob("runs/*")})
    seeds = seeds or sorted({int(p.name.removeprefix("seed-")) for p in out.glob("seeds/*/*")})
    config = load_config(None, {("study", "kind"): "lm", ("study", "seeds"): seeds or [1],
                                ("lm_study", "transforms"): transforms or found or ["softmax"],
                                ("lm_study", "bootstrap_samples"): samples})
    out.mkdir(parents=True, exist_ok=True)
    write_record(out, "lm", "test", config)
    return rebuild(out)


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def write_run(folder: Path, lr: float, steps: int = 100, loss: float = 4.8,
              done: bool = True, seed: int = 1) -> None:
    write_json(folder / "config.json", {
        "data": {"path": f"data/{CORPUS}", "block_size": 128, "max_tokens": 4096},
        "model": {"decoder_layers": 4, "d_model": 256, "heads": 4, "d_ff": 1024,
                  "dropout": 0.3, "tie_output": True},
        "train": {"lr": lr, "warmup": 400, "label_smoothing": 0.0, "max_steps": steps,
                  "seed": seed}})
    pd.DataFrame({"step": [50, 100], "val_loss": [loss + 0.5, loss],
                  "val_ppl": [np.exp(loss + 0.5), np.exp(loss)]}).to_csv(folder / "log.csv",
                                                                        index=False)
    if done:
        write_json(folder / "summary.json", {"steps": steps, "best_bleu": -loss,
                                             "best_step": 100})


def write_system(out: Path, name: str, decoding: str, seed: int,
                 tokens: list[list[int]]) -> dict:
    """A seed run's lm-eval row, its token ids and generation record."""
    folder = out / "seeds" / name / f"seed-{seed}"
    if not (folder / "config.json").is_file():
        write_run(folder, SELECTED.get(name, {"lr": 0.4})["lr"], loss=4.7 + seed / 10, seed=seed)
    row = eval_row(name, decoding, seed, tokens)
    (folder / "lm_eval").mkdir(parents=True, exist_ok=True)
    pd.DataFrame([row], columns=list(COLUMNS)).to_csv(folder / "lm_eval" / f"{decoding}.csv",
                                                      index=False)
    write_json(folder / "generations" / f"{decoding}.tokens.json", {"tokens": tokens})
    write_json(folder / "generations" / f"{decoding}.txt.json",
               {"tokens_per_s": 1000.0 + seed, "generated_tokens": 100})
    return row


def make_study(out: Path, systems: dict, seeds=(1, 2)) -> Path:
    """A study folder: ``systems[(name, decoding)]`` gives each seed's token ids."""
    write_json(out / "selected.json", SELECTED)
    write_json(out / "human.tokens.json", {"tokens": HUMAN})
    for name, point in SELECTED.items():
        for lr in (0.4, 0.8):
            write_run(out / "runs" / name / f"lr-{lr:g}_warmup-400_ls-0", lr,
                      loss=4.6 + abs(lr - point["lr"]))
    for (name, decoding), make in systems.items():
        for seed in seeds:
            write_system(out, name, decoding, seed, make(seed))
    return out


BASIC = {REF: lambda s: texts(s), ("softmax", "sample"): lambda s: texts(10 + s),
         ("1.5-relu", "sample"): lambda s: texts(20 + s),
         ("1.5-relu", "greedy"): lambda s: texts(30 + s, repetitive=True)}


@pytest.fixture
def study(tmp_path) -> Path:
    """2 transforms x 2 seeds x 2 decodings, 20 prompts."""
    return make_study(tmp_path / "study", BASIC)


def sig_row(out: Path, name: str, decoding: str, stat: str) -> pd.Series:
    frame = pd.read_csv(out / "significance.csv")
    hit = frame[(frame["transform"] == name) & (frame["decoding"] == decoding)
                & (frame["statistic"] == stat)]
    assert len(hit) == 1
    return hit.iloc[0]


def test_point_estimates_equal_the_lm_eval_rows(study):
    write_report(study, samples=100)
    rows = pd.read_csv(study / "lm_eval.csv")
    assert sorted(rows["run"].unique()) == ["seeds/1.5-relu/seed-1", "seeds/1.5-relu/seed-2",
                                            "seeds/softmax/seed-1", "seeds/softmax/seed-2"]
    for (name, decoding), part in rows.groupby(["transform", "decoding"]):
        for stat in ("distinct_2", "loop", "zipf"):
            for column in (stat, f"{stat}_gap"):
                got = sig_row(study, name, decoding, column)
                assert got["value"] == pytest.approx(part[column].mean(), abs=1e-12)
                assert got["human"] == pytest.approx(part[f"human_{stat}"].iloc[0], abs=1e-12)
            assert got["seeds"] == "1+2" and got["prompts"] == PROMPTS


def test_the_bootstrap_equals_a_brute_force_one(study):
    """Interval and p of relu's distinct-2 against the reference, recomputed here with the
    plain lm_metrics functions on every resampled list of continuations."""
    samples = 60
    write_report(study, samples=samples)
    counts = resample_counts(PROMPTS, samples).numpy()
    index = [np.repeat(np.arange(PROMPTS), row) for row in counts]

    def per_resample(make, stat):
        return np.array([np.mean([stat([make(s)[i] for i in drawn]) for s in (1, 2)])
                         for drawn in index])

    def distinct(x):
        return M.distinct_n(x, 2)

    mine, ref = per_resample(BASIC["1.5-relu", "sample"], distinct), \
        per_resample(BASIC[REF], distinct)
    got = sig_row(study, "1.5-relu", "sample", "distinct_2")
    bias = (mine - ref).mean() - got["delta"]
    assert got["delta_bias"] == pytest.approx(bias, abs=1e-12)
    low, high = interval95(mine - ref - bias)
    assert (got["delta_low"], got["delta_high"]) == pytest.approx((low, high), abs=1e-12)
    assert got["p_value"] == pytest.approx(p_value(mine, ref, got["delta"]))
    human = np.array([M.zipf_coefficient([HUMAN[i] for i in drawn]) for drawn in index])
    gaps = [np.mean([abs(M.zipf_coefficient([make(s)[i] for i in drawn]) - h)
                     for s in (1, 2)]) for drawn, h in zip(index, human)
            for make in (BASIC["softmax", "sample"],)]
    ref_gaps = [np.mean([abs(M.zipf_coefficient([BASIC[REF](s)[i] for i in drawn]) - h)
                         for s in (1, 2)]) for drawn, h in zip(index, human)]
    got = sig_row(study, "softmax", "sample", "zipf_gap")
    diffs = np.array(gaps) - np.array(ref_gaps)
    assert (got["delta_low"], got["delta_high"]) == pytest.approx(
        interval95(diffs - diffs.mean() + got["delta"]), abs=1e-9)


def test_a_system_identical_to_the_reference_differs_by_nothing(tmp_path):
    out = make_study(tmp_path, {REF: lambda s: texts(s),
                                ("1.5-entmax-k100", "sample"): lambda s: texts(s)})
    write_report(out, samples=200)
    for name, decoding in (REF, ("1.5-entmax-k100", "sample")):
        for stat in ("distinct_2", "loop_gap", "zipf", "zipf_gap"):
            got = sig_row(out, name, decoding, stat)
            assert got["delta"] == got["delta_bias"] == 0 and got["p_value"] == 1
            assert got["delta_low"] == 0 == got["delta_high"]
    report = (out / "REPORT.md").read_text()
    assert "(a)-(c) Not measured yet: no alpha-ReLU model has lm-eval rows." in report


def test_a_repetitive_system_differs_significantly(study):
    write_report(study, samples=200)
    distinct = sig_row(study, "1.5-relu", "greedy", "distinct_2")
    loop = sig_row(study, "1.5-relu", "greedy", "loop")
    assert distinct["delta"] < 0 and distinct["delta_high"] < 0 and distinct["p_value"] < 0.05
    assert loop["value"] == 1 and loop["delta"] > 0 and loop["p_value"] < 0.05
    # resampled distinct-2 shrinks (a prompt drawn twice adds no distinct bigram), less for
    # the repetitive system: the shifted interval still holds the observed difference
    assert distinct["delta_bias"] > 0.05
    assert distinct["delta_low"] <= distinct["delta"] <= distinct["delta_high"]
    assert "bs:200|bs_seed:12345" in distinct["signature"]
    report = (study / "REPORT.md").read_text()
    table = report.index("## Paired bootstrap over test prompts")
    assert report.index("The verdicts read the 95% interval of Δ", table) < report.index(
        "## Learning-rate sweep", table)


def test_summary_means_and_stds_equal_pandas(study):
    write_report(study, samples=20)
    rows, summary = pd.read_csv(study / "lm_eval.csv"), pd.read_csv(study / "summary.csv")
    expected = rows.groupby(["transform", "decoding"])[["eps_ppl", "sp", "distinct_2", "loop",
                                                        "zipf_gap", "ppl"]].agg(["mean", "std"])
    assert len(summary) == len(expected) == 4
    for r in summary.to_dict("records"):
        for metric in ("eps_ppl", "sp", "distinct_2", "loop", "zipf_gap", "ppl"):
            for what in ("mean", "std"):
                want = expected.loc[(r["transform"], r["decoding"]), (metric, what)]
                assert r[f"{metric}_{what}"] == pytest.approx(want, nan_ok=True)
        assert r["n"] == 2 and r["seeds"] == "1 / 2" and r["gen_tokens_per_s"] == 1001.5
    eps = summary.set_index(["transform", "decoding"])["eps"]
    assert eps["softmax", "sample"] == "1e-05" and eps["1.5-relu", "greedy"] == "0.001 / 1e-05"
    assert summary.set_index("transform").loc["1.5-relu", "label"].iloc[0] == "1.5-ReLU"


def set_machine(study: Path, name: str, decoding: str, seed: int, where: str | None,
                summary_machine: str | None = None) -> None:
    """Name the machine of a generation record (None: a record of before records named
    it), and optionally the machine of its run's summary.json."""
    folder = study / "seeds" / name / f"seed-{seed}"
    record = folder / "generations" / f"{decoding}.txt.json"
    meta = json.loads(record.read_text()) | ({} if where is None else {"machine": where})
    write_json(record, meta)
    if summary_machine is not None:
        summary = json.loads((folder / "summary.json").read_text())
        write_json(folder / "summary.json", summary | {"machine": summary_machine})


def test_generation_rates_of_different_machines_are_not_averaged_nor_compared(study):
    """Tokens/s timed on two machines: no mean, both machines named, and the interim speed
    line compares nothing."""
    set_machine(study, "1.5-relu", "sample", 1, "Xeon, 2 CPUs")
    set_machine(study, "1.5-relu", "sample", 2, "EPYC, 2 CPUs")
    for seed in (1, 2):  # the reference's records predate the machine field: summary.json's
        set_machine(study, *REF, seed, None, summary_machine="EPYC, 2 CPUs")
    report = write_report(study, samples=20).read_text()
    summary = pd.read_csv(study / "summary.csv").set_index(["transform", "decoding"])
    relu, ref = summary.loc[("1.5-relu", "sample")], summary.loc[REF]
    assert pd.isna(relu["gen_tokens_per_s"]) and relu["gen_machine"] == "Xeon, 2 CPUs / EPYC, 2 CPUs"
    assert ref["gen_tokens_per_s"] == 1001.5 and ref["gen_machine"] == "EPYC, 2 CPUs"
    assert ("The generation records' tokens/s are not compared: one machine did not time them "
            "all (1.5-ReLU (`1.5-relu`) sample: Xeon, 2 CPUs / EPYC, 2 CPUs; softmax "
            "sample-top_p0.9: EPYC, 2 CPUs).") in report
    assert "tokens/s (" not in report


def test_generation_rates_of_one_machine_are_compared_naming_it(study):
    set_machine(study, "1.5-relu", "sample", 1, "EPYC, 2 CPUs")
    set_machine(study, "1.5-relu", "sample", 2, None, summary_machine="EPYC, 2 CPUs")
    for seed in (1, 2):
        set_machine(study, *REF, seed, "EPYC, 2 CPUs")
    report = write_report(study, samples=20).read_text()
    assert ("The generation records, timed while the study ran (not quietly), give 1.5-ReLU "
            "(`1.5-relu`) sample 1,002 vs softmax sample-top_p0.9 1,002 tokens/s "
            "(EPYC, 2 CPUs).") in report


def test_missing_seeds_and_decodings_are_reported(study):
    (study / "seeds/1.5-relu/seed-2/lm_eval/greedy.csv").unlink()
    (study / "seeds/softmax/seed-2/summary.json").unlink()
    report = write_report(study, samples=20, seeds=[1, 2, 3],
                          transforms=["softmax", "1.5-relu", "1.5-entmax-k100"]).read_text()
    summary = pd.read_csv(study / "summary.csv").set_index(["transform", "decoding"])
    assert summary.loc[("1.5-relu", "greedy"), "n"] == 1
    assert summary.loc[("1.5-relu", "greedy"), "missing_seeds"] == "2 / 3"
    for line in ("softmax seed 3: not trained", "1.5-ReLU seed 2: not evaluated: greedy",
                 "softmax seed 2: still training"):
        assert line in report
    assert "(b) Is 1.5-ReLU (`1.5-relu`) sampling's perplexity-like cost no worse than " \
           "1.5-entmax sampling's? Not measured yet" in report


def test_a_transform_still_in_its_sweep_is_missing(study):
    for lr, done in ((0.2, True), (0.4, True), (0.8, False)):
        folder = study / "runs" / "2-entmax-k100" / f"lr-{lr:g}_warmup-400_ls-0"
        write_run(folder, lr, done=done)
        config = json.loads((folder / "config.json").read_text())
        write_json(folder / "config.json", {**config, "sweep": {
            "transforms": ["2-entmax-k100"], "lr": [0.2, 0.4, 0.8, 1.6], "warmup": [],
            "label_smoothing": []}})
    report = write_report(study, samples=20, seeds=[1, 2]).read_text()
    assert ("Missing so far: sparsemax (`2-entmax-k100`): lr sweep 2 of 4 points finished, "
            "so no seed is trained yet (seeds 1, 2).") in report
    assert "sparsemax seed" not in report and "Nothing is missing" not in report
    for folder in (study / "runs" / "2-entmax-k100").iterdir():  # a grid not recorded
        write_run(folder, 0.4)
    assert "lr sweep 3 of ? points finished" in write_report(study, samples=20).read_text()


def test_the_verdicts_carry_the_computed_numbers(tmp_path):
    out = make_study(tmp_path, {**BASIC, ("1.5-entmax-k100", "sample"): lambda s: texts(40 + s)})
    report = write_report(out, samples=200).read_text()
    summary = pd.read_csv(out / "summary.csv").set_index(["transform", "decoding"])
    relu, entmax = summary.loc[("1.5-relu", "sample")], summary.loc[("1.5-entmax-k100", "sample")]
    d2 = sig_row(out, "1.5-relu", "sample", "distinct_2")
    assert (f"distinct-2 {d2['value']:.3f} vs {d2['baseline_value']:.3f} "
            f"(Δ {d2['delta']:+.3f} [{d2['delta_low']:+.3f}, {d2['delta_high']:+.3f}], "
            f"p = {d2['p_value']:.3f}") in report
    # eps-ppl: relu 125 + 3 s^2 = 128 / 137 against entmax 121 / 130; std 6.36 each
    assert relu["eps_ppl_mean"] == 132.5 and entmax["eps_ppl_mean"] == 125.5
    assert ("ε-perplexity 132.500 ± 6.364 vs 125.500 ± 6.364 (Δ +7.000: worse)") in report
    assert "sp 0.615 ± 0.007 vs 0.605 ± 0.007 (Δ +0.010: better)" in report
    assert "(b) Is 1.5-ReLU (`1.5-relu`) sampling's perplexity-like cost no worse than " \
           "1.5-entmax sampling's? **does not hold** against `1.5-entmax-k100`" in report
    # softmax sample ppl: 110 + 2 s = 112 / 114
    assert "(d) Is the softmax model a real language model (test perplexity ≤ 116, " in report
    assert "**holds**: test perplexity 113.000 ± 1.414 (seeds 1 / 2)" in report
    assert "1.5-entmax (`1.5-entmax-k100`) 125.500 ± 6.364" in report
    assert "(c) How fast is 1.5-ReLU (`1.5-relu`) sampling per token? Not measured yet: " \
           "bench_generate.csv is missing" in report
    assert "Selected on dev loss: 1.5-entmax (`1.5-entmax-k100`) lr 0.4" in report


@pytest.mark.parametrize("transforms, line", [
    (["softmax", "1.5-relu"], "1.5-entmax sampling's? Not asked by this study: its transforms "
                              "(softmax, 1.5-ReLU) include no 1.5-entmax."),
    (["softmax", "1.5-relu", "1.5-entmax-k100"], "1.5-entmax sampling's? Not measured yet")])
def test_a_study_without_entmax_does_not_ask_the_cost_question(tmp_path, transforms, line):
    out = make_study(tmp_path, BASIC)
    report = write_report(out, samples=20, transforms=transforms).read_text()
    assert line in report


def test_cost_with_one_entmax_seed_is_not_resolved(tmp_path):
    out = make_study(tmp_path, BASIC)
    write_system(out, "1.5-entmax-k100", "sample", 1, texts(41))
    report = write_report(out, samples=20).read_text()
    assert "1.5-entmax sampling's? **not resolved at 1 seed** against `1.5-entmax-k100`" in report
    assert report.count("one seed on a side: not resolved") == 3       # eps-ppl, sp, JSD


def test_cost_within_the_seeds_spread_is_not_resolved(tmp_path, monkeypatch):
    monkeypatch.setitem(TEACHER, ("1.5-entmax-k100", "sample"), TEACHER["1.5-relu", "sample"])
    out = make_study(tmp_path, {**BASIC, ("1.5-entmax-k100", "sample"): lambda s: texts(40 + s)})
    report = write_report(out, samples=20).read_text()
    assert ("1.5-entmax sampling's? **not resolved at 2 seeds (no metric worse by more than the "
            "larger std)** against `1.5-entmax-k100`") in report
    assert report.count("within one std: not resolved at 2 seeds") == 3


def test_a_repetitive_relu_does_not_hold_and_speed_comes_from_the_bench(tmp_path):
    out = make_study(tmp_path, {REF: lambda s: texts(s),
                                ("1.5-relu", "sample"): lambda s: texts(s, repetitive=True)})
    pd.DataFrame({"transform": ["1.5-relu", "softmax", "softmax", "1.5-relu", "softmax"],
                  "decoding": ["sample", "sample-top_p0.9", "sample-top_p0.9", "sample",
                               "sample-top_p0.9"],
                  "batch": [1, 1, 1, 32, 32],
                  "ms_per_token": [0.1, 0.3, 0.5, 0.01, 0.02]}).to_csv(
        out / "bench_generate.csv", index=False)
    report = write_report(out, samples=200).read_text()
    assert "as non-degenerate as softmax sample-top_p0.9? **does not hold**" in report
    assert ("0.100 ms per token at batch 1 (bench_generate.csv, quiet); against softmax "
            "sample-top_p0.9 0.400 ms (× 0.25 its time)") in report
    summary = pd.read_csv(out / "summary.csv").set_index(["transform", "decoding"])
    assert summary.loc[REF, "ms_per_token"] == 0.4 and summary.loc[REF, "bench_batch"] == 1
    assert summary["bench_batch"].isna().sum() == (summary["ms_per_token"].isna()).sum()


def test_a_bench_without_batch_sizes_is_refused(tmp_path):
    out = make_study(tmp_path, {})
    pd.DataFrame({"transform": ["softmax"], "decoding": ["sample"],
                  "ms_per_token": [0.1]}).to_csv(out / "bench_generate.csv", index=False)
    with pytest.raises(UserError, match="lacks the column\\(s\\) batch; delete it and "
                       "measure again \\(arelu bench lm-study"):
        write_report(out, samples=20)
    assert not (out / "REPORT.md").exists()


def test_sweep_and_curves(study):
    write_report(study, samples=20)
    sweep = pd.read_csv(study / "sweep.csv")
    chosen = sweep[sweep["selected"]]
    assert sorted(zip(chosen["transform"], chosen["lr"])) == [("1.5-relu", 0.8), ("softmax", 0.4)]
    assert chosen["dev_loss"].tolist() == [4.6, 4.6]
    assert chosen["dev_ppl"].tolist() == pytest.approx([np.exp(4.6)] * 2)
    curves = pd.read_csv(study / "dev_curves.csv")
    assert len(curves) == 8 and set(curves["step"]) == {50, 100}


def test_the_figures_are_drawn_and_shown(study):
    report = write_report(study, samples=20).read_text()
    for png in ("summary.png", "dev_curves.png"):
        assert png_ours(study / png)
    assert "![Figure: distance to human text against ε-perplexity](summary.png)" in report
    assert "![Figure: dev loss against steps](dev_curves.png)" in report
    assert "Language models on PTB compared" in report


def test_greedy_rows_alone_draw_no_summary_figure_and_a_stale_one_goes(study):
    write_report(study, samples=20)
    assert (study / "summary.png").exists()
    shutil.rmtree(study / "seeds" / "softmax")
    for row in study.glob("seeds/1.5-relu/seed-*/lm_eval/sample.csv"):
        row.unlink()  # 1.5-ReLU greedy alone: nothing to draw against eps-perplexity
    report = write_report(study, samples=20).read_text()
    assert not (study / "summary.png").exists() and (study / "dev_curves.png").exists()
    assert "(summary.png)" not in report and "(dev_curves.png)" in report


def test_a_figure_someone_else_wrote_is_refused_before_anything_is_written(study):
    (study / "dev_curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    with pytest.raises(UserError, match="dev_curves.png exists and was not written by arelu"):
        write_report(study, samples=20)
    assert not (study / "summary.csv").exists() and not (study / "REPORT.md").exists()


def test_another_corpus_is_named_and_held_to_no_ptb_target(tmp_path, monkeypatch):
    """The PTB perplexity target is PTB's: a study on another corpus states its softmax
    perplexity with no verdict, and is named by its rows' signatures."""
    monkeypatch.setitem(globals(), "CORPUS", "tinyshakespeare")
    report = write_report(make_study(tmp_path, BASIC), samples=20).read_text()
    assert "Language models on Tiny Shakespeare compared" in report and "PTB" not in report
    assert ("(d) The softmax model's test perplexity on Tiny Shakespeare (no published target "
            "is set for this corpus, so no verdict): test perplexity 113.000 ± 1.414") in report
    assert "Zaremba" not in report and "**holds**: test perplexity" not in report


def test_an_empty_study_says_nothing_is_measured(tmp_path):
    report = write_report(tmp_path, samples=20).read_text()
    assert "No compared run yet (seeds/ is empty); the lr sweep has not selected yet." in report
    assert "Nothing is missing" not in report
    assert "(a)-(c) Not measured yet" in report
    assert "(d) The softmax model's test perplexity on an unnamed corpus" in report
    assert pd.read_csv(tmp_path / "significance.csv").empty
    assert not (tmp_path / "summary.png").exists() and "![" not in report


@pytest.mark.parametrize("damage, message", [
    (lambda f: f.write_text("checkpoint,transform\n\"a,b\n"), "is empty or not a CSV"),
    (lambda f: f.write_text("a,b\n1,2\n"), "is not one arelu lm-eval row"),
    (lambda f: f.write_text(f.read_text().replace(",greedy,", ",sample,")),
     "holds 1.5-relu x sample at seed 1, not 1.5-relu x greedy"),
    (lambda f: (f.parent.parent / "generations/greedy.tokens.json").write_text(
        json.dumps({"tokens": texts(3)})), "gives distinct_2 .* lm-eval row says"),
    (lambda f: (f.parent.parent / "generations/greedy.tokens.json").write_text("{"),
     "is not readable JSON"),
    (lambda f: (f.parent.parent / "generations/greedy.tokens.json").write_text(
        json.dumps({"tokens": texts(3)[:5]})), "has 5 continuations but human.tokens.json has 20")])
def test_a_bad_file_is_one_line_naming_it(study, damage, message):
    """A broken or stale lm-eval row or generation: the file and what to do, nothing
    written."""
    path = study / "seeds/1.5-relu/seed-1/lm_eval/greedy.csv"
    damage(path)
    with pytest.raises(UserError, match=message) as err:
        write_report(study, samples=20)
    assert "\n" not in str(err.value) and "seed-1" in str(err.value)
    assert "to evaluate again" in str(err.value)
    assert not (study / "REPORT.md").exists() and not (study / "summary.csv").exists()


@pytest.mark.parametrize("name, readable", [
    ("softmax", "softmax"), ("1.5-relu", "1.5-ReLU"), ("1.5-entmax-k100", "1.5-entmax"),
    ("2-entmax-k100", "sparsemax"), ("sparsemax", "sparsemax"), ("1.5-entmax", "1.5-entmax"),
    ("not-a-transform", "not-a-transform")])
def test_label(name, readable):
    assert label(name) == readable


@pytest.mark.parametrize("tokens, message", [
    (texts(7), "human.tokens.json gives distinct_2 .* lm-eval row says"),
    ([], "human.tokens.json holds no continuation")])
def test_a_stale_human_file_is_refused(study, tokens, message):
    write_json(study / "human.tokens.json", {"tokens": tokens})
    with pytest.raises(UserError, match=message):
        write_report(study, samples=20)
    assert not (study / "REPORT.md").exists()


@pytest.mark.parametrize("best, line", [
    (0.0, "(a) `sample-tau_dev` of 1.5-ReLU (`1.5-relu`): the tau shift selected on dev "
          "(`tau_sweep.csv`) is 0, the paper's tau, so it is pure sampling"),
    (0.1, "(a) Is `sample-tau_dev` (tau shift +0.1 selected on dev) 1.5-ReLU (`1.5-relu`) "
          "sampling as non-degenerate as softmax sample-top_p0.9? **")])
def test_the_tuned_verdict_names_its_shift(tmp_path, best, line):
    out = make_study(tmp_path / "study", {**BASIC, ("1.5-relu", TUNED): lambda s: texts(20 + s)})
    shifts = [-0.1, 0.0, 0.1]
    pd.DataFrame({"tau_shift": shifts, "dev_eps_ppl": [150.0 - 10 * (s == best) for s in shifts]}
                 ).to_csv(out / "seeds/1.5-relu/seed-1" / TAU_SWEEP, index=False)
    report = write_report(out, samples=20).read_text()
    assert line in report
    assert report.count("(a) Is ") == (1 if best == 0 else 2)


def test_arelu_report_rewrites_a_study_from_its_files_with_the_recorded_settings(study, cli):
    config = load_config(None, {("study", "kind"): "lm", ("study", "seeds"): [1, 2, 3],
                                ("lm_study", "transforms"): ["softmax", "1.5-relu"],
                                ("lm_study", "bootstrap_samples"): 20})
    write_record(study, "lm", "test", config)
    ran = cli("report", study)
    assert ran.code == 0, ran.err
    report = (study / "REPORT.md").read_text()
    assert "(20 resamples)" in report and "1.5-ReLU seed 3: not trained" in report
    assert "Not asked by this study: its transforms (softmax, 1.5-ReLU)" in report
    assert pd.read_csv(study / "significance.csv")["samples"].eq(20).all()


def test_lowered_seeds_leave_the_others_out_with_a_note(study):
    report = write_report(study, samples=20, seeds=[1],
                          transforms=["softmax", "1.5-relu"]).read_text()
    summary = pd.read_csv(study / "summary.csv")
    assert summary["n"].eq(1).all() and summary["seeds"].astype(str).eq("1").all()
    assert "seeds/softmax/seed-2 is left out: [lm_study] transforms (softmax, 1.5-relu) and " \
           "[study] seeds (1) do not include it." in report


@pytest.mark.parametrize("cell, message", [
    ("nan", r"ppl is empty at seed 2 but not at seed 1, so no mean over the seeds is honest"),
    ("abc", r"ppl is 'abc', not a number")])
def test_a_metric_missing_for_one_seed_or_not_a_number_is_one_line(study, cell, message):
    """A mean over the seeds that have a value would pass for one over every seed."""
    path = study / "seeds/softmax/seed-2/lm_eval/sample.csv"
    frame = pd.read_csv(path)
    frame["ppl"] = frame["ppl"].astype(object)
    frame.loc[0, "ppl"] = cell
    frame.to_csv(path, index=False)
    with pytest.raises(UserError, match=message) as refused:
        write_report(study, samples=20)
    assert "\n" not in str(refused.value) and not (study / "REPORT.md").exists()
