"""arelu_cli.studies.lm.study: the LM study's plan (sweep, seeds, evaluation) over the core,
end to end on a tiny language model."""

import dataclasses
import json

import pandas as pd
import pytest

from arelu_cli.analysis.lm_eval import COLUMNS
from arelu_cli.config import load_config
from arelu_cli.util.errors import UserError
from arelu_cli.studies.generations import HUMAN
from arelu_cli.studies.lm import study as L
from arelu_cli.studies.core import trainer


@pytest.mark.parametrize("label", ["greedy", "sample", "sample-top_p0.9", "sample-top_k50",
                                   "sample-top_k50-T0.8", "sample-tau+0.1", "sample-tau-0.5",
                                   "sample-top_k10-top_p0.5-T2"])
def test_a_label_parses_to_the_decoding_that_writes_it(label):
    from arelu_cli.decode.sampling import Decoding

    assert Decoding.from_label(label).label() == label


def test_decodings_parse_to_their_own_labels():
    assert L.decoding("sample").label() == "sample"
    assert L.decoding("greedy").label() == "greedy"
    assert L.decoding("sample-top_p0.9").top_p == 0.9
    assert L.decoding("sample-top_k50").top_k == 50
    with pytest.raises(UserError, match="is not a decoding; write greedy, sample"):
        L.decoding("nucleus")
    with pytest.raises(UserError, match="write the decoding 'sample-top_p0.90' as 'sample-top_p0.9'"):
        L.decoding("sample-top_p0.90")
    with pytest.raises(UserError, match=r"top-p must lie in \(0, 1\]"):
        L.decoding("sample-top_p1.5")


def _config(corpus, tiny_lm_config, **study):
    base = tiny_lm_config(corpus, tau="auto", max_steps=8, keep_every=4, warmup=4,
                          log_every=4, valid_every=4, save_every=4, max_minutes=0.0)
    lm = dataclasses.replace(base.lm_study, transforms=("softmax", "1.5-relu"), sweep_steps=4,
                             decodings=("sample", "sample-top_p0.9", "greedy"), prompts=5,
                             max_new_tokens=4, stride=8, bootstrap_samples=10,
                             tau_shifts=(-0.1, 0.0, 0.3))
    lm = dataclasses.replace(lm, **study)
    return dataclasses.replace(base, lm_study=lm,
                               sweep=dataclasses.replace(base.sweep, lr=(1.0, 2.0)),
                               study=dataclasses.replace(base.study, seeds=(1, 2)))


def test_each_transform_gets_the_decodings_it_allows(tiny_lm_corpus, tiny_lm_config):
    config = _config(tiny_lm_corpus, tiny_lm_config)
    assert L.decodings_of(config, "softmax") == ["sample", "sample-top_p0.9", "greedy"]
    assert L.decodings_of(config, "1.5-relu") == ["sample", "greedy"]


@pytest.mark.parametrize("change, message", [
    ({"baseline": "sparsemax"}, "baseline 'sparsemax' is not a transform the study trains"),
    ({"reference": "sample-top_p0.5"}, "reference 'sample-top_p0.5' is not a decoding"),
    ({"sweep_steps": 3}, "sweep_steps \\(3\\) must be a multiple of \\[train\\] keep_every"),
    ({"sweep_steps": 12}, "at most max_steps"),
    ({"transforms": ()}, "transforms is empty"),
    ({"prompts": -1}, "prompts must be >= 0"),
])
def test_a_study_that_cannot_give_its_tables_is_refused(tiny_lm_corpus, tiny_lm_config, change,
                                                        message):
    with pytest.raises(UserError, match=message):
        L.check(_config(tiny_lm_corpus, tiny_lm_config, **change))


def test_a_translation_recipe_and_seeds_without_the_first_are_refused(tiny_lm_corpus,
                                                                      tiny_lm_config):
    config = _config(tiny_lm_corpus, tiny_lm_config)
    with pytest.raises(UserError, match='needs a language-model recipe \\(\\[data\\] task = "lm"\\)'):
        L.check(dataclasses.replace(config, data=dataclasses.replace(config.data, task="nmt")))
    with pytest.raises(UserError, match="seeds must include \\[train\\] seed \\(1\\)"):
        L.check(dataclasses.replace(config, study=dataclasses.replace(config.study,
                                                                      seeds=(2, 3))))


@pytest.mark.parametrize("recipe", ["ptb-lm-study", "tinyshakespeare-lm-study"])
def test_the_shipped_recipes_pass_their_checks(recipe):
    config = load_config(L.Path(__file__).parents[3] / "recipes" / f"{recipe}.toml")
    L.check(config)
    assert config.study.kind == "lm"
    assert L.decodings_of(config, config.lm_study.transforms[-1])[0] == "sample"


def test_a_sweep_of_the_whole_budget_is_its_first_seed(tiny_lm_corpus, tiny_lm_config, tmp_path,
                                                       report_spy, one_thread, run_study):
    """One lr and sweep_steps = max_steps: seed 1's run is the sweep run's copy, not trained
    again."""
    from rich.console import Console

    config = _config(tiny_lm_corpus, tiny_lm_config, transforms=("1.5-relu",), sweep_steps=8,
                     decodings=("sample", "greedy"), baseline="1.5-relu", reference="sample")
    config = dataclasses.replace(config, sweep=dataclasses.replace(config.sweep, lr=(1.0,)),
                                 study=dataclasses.replace(config.study, seeds=(1,)))
    out, console = tmp_path / "study", Console(quiet=True)
    real, trained = trainer(None, console), []

    def counting(cfg, folder, resume):
        trained.append((folder.relative_to(out).as_posix(), resume))
        return real(cfg, folder, resume)

    run_study(config, out, counting, "lm")
    assert trained[0] == ("runs/1.5-relu/lr-1_warmup-4_ls-0", False)
    first = out / "seeds" / "1.5-relu" / "seed-1"
    assert json.loads((first / "summary.json").read_text())["steps"] == 8
    log = pd.read_csv(first / "log.csv")
    assert list(log["step"]) == [4, 8]
    assert (first / "lm_eval" / "greedy.csv").is_file()


@pytest.fixture
def report_spy(monkeypatch):
    """The runner's report replaced by one that records its call (the report has its own
    tests): the study's outputs are what is checked here."""
    from arelu_cli.studies import runner
    from arelu_cli.util.ownership import write_markdown

    calls = []

    def write_report(study, config, out):
        calls.append(out)
        return write_markdown(out / "REPORT.md", "report\n")
    monkeypatch.setattr(runner, "write_report", write_report)
    return calls


def test_sweep_seeds_and_evaluation_end_to_end_then_nothing_again(
        tiny_lm_corpus, tiny_lm_config, tmp_path, report_spy, one_thread, run_study):
    from rich.console import Console

    config, out = _config(tiny_lm_corpus, tiny_lm_config), tmp_path / "study"
    console = Console(quiet=True)
    real, trained = trainer(None, console), []

    def counting(cfg, folder, resume):
        trained.append((folder.relative_to(out).as_posix(), resume))
        return real(cfg, folder, resume)

    report = run_study(config, out, counting, "lm")
    assert report == out / "REPORT.md"
    # transform by transform: its sweep, then its seeds (seed 1 continues a copy of the
    # selected sweep run; seed 2 trains from the start), then a report of what is finished
    assert trained == [run for n in ("softmax", "1.5-relu") for run in (
        (f"runs/{n}/lr-1_warmup-4_ls-0", False), (f"runs/{n}/lr-2_warmup-4_ls-0", False),
        (f"seeds/{n}/seed-1", True), (f"seeds/{n}/seed-2", False))]
    assert len(report_spy) == 3  # a report after each transform, and at the end
    selected = json.loads((out / "selected.json").read_text())
    assert set(selected) == {"softmax", "1.5-relu"}
    for name in ("softmax", "1.5-relu"):
        source = out / "runs" / name / selected[name]["run"]
        assert json.loads((source / "summary.json").read_text())["steps"] == 4
        first = out / "seeds" / name / "seed-1"
        assert json.loads((first / "summary.json").read_text())["steps"] == 8
        log = pd.read_csv(first / "log.csv")
        assert list(log["step"]) == [4, 8]  # one log across the continuation
    human = json.loads((out / HUMAN).read_text())["tokens"]
    assert len(human) == 5
    sweep = pd.read_csv(out / "seeds" / "1.5-relu" / "seed-1" / L.TAU_SWEEP)
    assert list(sweep["tau_shift"]) == [-0.1, 0.0, 0.3]
    assert (sweep["dev_eps_ppl"] > 1).all() and sweep["zero_share"].between(0, 1).all()
    best = sweep.loc[sweep["dev_eps_ppl"].idxmin(), "tau_shift"]
    assert L.selected_shift(out / "seeds" / "1.5-relu" / "seed-1") == best
    assert not (out / "seeds" / "1.5-relu" / "seed-2" / L.TAU_SWEEP).exists()
    assert not (out / "seeds" / "softmax" / "seed-1" / L.TAU_SWEEP).exists()
    for seed in (1, 2):
        tuned = pd.read_csv(out / "seeds" / "1.5-relu" / f"seed-{seed}" / "lm_eval" / f"{L.TUNED}.csv")
        assert tuned["decoding"][0] == L.TUNED
        assert (f"tau{best:+g}" in tuned["signature"][0]) == (best != 0)
    for name, labels in (("softmax", ["sample", "sample-top_p0.9", "greedy"]),
                         ("1.5-relu", ["sample", "greedy", L.TUNED])):
        for seed in (1, 2):
            folder = out / "seeds" / name / f"seed-{seed}"
            assert sorted(p.stem for p in (folder / "lm_eval").glob("*.csv")) == sorted(labels)
            for label in labels:
                row_path, gen_path, ids_path = L.output_paths(folder, label)
                row = pd.read_csv(row_path)
                assert list(row.columns) == list(COLUMNS) and len(row) == 1
                assert row["transform"][0] == name and row["seed"][0] == seed
                assert row["decoding"][0] == label and row["stride"][0] == 8
                assert row["generations"][0] == str(gen_path.relative_to(out))
                assert not row["checkpoint"][0].startswith("/")  # relative to the folder
                tokens = json.loads(ids_path.read_text())["tokens"]
                lines = gen_path.read_text(encoding="utf-8").splitlines()
                assert len(tokens) == len(lines) == 5 == row["prompts"][0]
                assert all(len(t) <= 4 for t in tokens)
    made = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()
            and "lm_eval" in p.parts}
    trained.clear()
    run_study(config, out, counting, "lm")
    assert trained == []
    assert made == {p: p.stat().st_mtime_ns for p in made}
    # an edited evaluation setting is refused, never reported as the old rows' setting
    for key, value in (("prefix_tokens", 3), ("max_new_tokens", 9), ("tau_shifts", (0.0,))):
        edited = dataclasses.replace(config, lm_study=dataclasses.replace(config.lm_study,
                                                                          **{key: value}))
        with pytest.raises(UserError, match=f"\\[lm_study\\] {key}"):
            run_study(edited, out, counting, "lm")
    assert trained == [] and made == {p: p.stat().st_mtime_ns for p in made}


def test_a_diverged_sweep_run_loses_and_the_study_goes_on(tiny_lm_corpus, tiny_lm_config,
                                                          tmp_path, report_spy, run_study):
    """A sweep run that diverges is a finding: scored minus infinity, never retrained."""
    from rich.console import Console

    from arelu_cli.train.divergence import Diverged
    from arelu_cli.train.run_dir import DIVERGED

    config = _config(tiny_lm_corpus, tiny_lm_config, transforms=("softmax",),
                     decodings=("sample", "sample-top_p0.9"))
    config = dataclasses.replace(config, study=dataclasses.replace(config.study, seeds=(1,)))
    out, console = tmp_path / "study", Console(quiet=True)
    real = trainer(None, console)

    def diverging(cfg, folder, resume):
        if cfg.train.lr == 2.0:  # what the trainer leaves when it stops on a NaN loss
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(json.dumps({**cfg.to_dict(), "resolved": {}}))
            (folder / DIVERGED).write_text(json.dumps({"step": 3, "train_loss": "nan"}))
            raise Diverged("loss is nan at step 3")
        return real(cfg, folder, resume)

    run_study(config, out, diverging, "lm")
    assert json.loads((out / "selected.json").read_text())["softmax"]["lr"] == 1.0
    assert (out / "seeds" / "softmax" / "seed-1" / "lm_eval" / "sample.csv").is_file()
    run_study(config, out, diverging, "lm")  # not retrained, selection unchanged
    assert json.loads((out / "selected.json").read_text())["softmax"]["lr"] == 1.0


def test_the_report_reads_what_the_plan_wrote(tiny_lm_corpus, tiny_lm_config, tmp_path,
                                             one_thread, run_study):
    """The real report on a tiny study: every seed run x decoding in its tables, the tuned
    tau's decoding among them, point estimates equal to the lm-eval rows."""
    from rich.console import Console

    config = _config(tiny_lm_corpus, tiny_lm_config, tau_shifts=(0.0, 0.3))
    out = tmp_path / "study"
    report = run_study(config, out, trainer(None, Console(quiet=True)), "lm")
    text = report.read_text(encoding="utf-8")
    assert "softmax" in text and "1.5-relu" in text
    shift = L.selected_shift(out / "seeds" / "1.5-relu" / "seed-1")
    assert (f"Is `sample-tau_dev` (tau shift {shift:+g} selected on dev) 1.5-ReLU" in text
            if shift else "the tau shift selected on dev (`tau_sweep.csv`) is 0" in text)
    summary = pd.read_csv(out / "summary.csv")
    pairs = set(zip(summary["transform"], summary["decoding"]))
    assert pairs == {("softmax", "sample"), ("softmax", "sample-top_p0.9"), ("softmax", "greedy"),
                     ("1.5-relu", "sample"), ("1.5-relu", "greedy"), ("1.5-relu", L.TUNED)}
    assert (summary["n"] == 2).all()
    rows = pd.read_csv(out / "lm_eval.csv")
    relu = rows[(rows["transform"] == "1.5-relu") & (rows["decoding"] == "sample")]
    mean = summary.set_index(["transform", "decoding"]).loc[("1.5-relu", "sample"), "distinct_2_mean"]
    assert mean == pytest.approx(relu["distinct_2"].mean())
    sig = pd.read_csv(out / "significance.csv")
    assert set(sig["reference"]) == {"sample-top_p0.9"} and (sig["baseline"] == "softmax").all()
