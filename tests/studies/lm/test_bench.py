"""arelu_cli.studies.lm.bench (``arelu bench lm-study``): on a tiny real LM study, one row per
model x decoding x batch, paired ratios, and the study's report picks the CSV up; bad study
folders fail in one line. Times are never asserted beyond being positive."""

import dataclasses
import shutil

import pandas as pd
import pytest
import torch
from rich.console import Console

from arelu_cli.studies.contract import RECORD, Context
from arelu_cli.studies.core import trainer
from arelu_cli.studies.lm import bench as B
from arelu_cli.studies.lm.runs import TUNED, selected_shift
from arelu_cli.studies.runner import report as rebuild, run
from arelu_cli.util.errors import UserError

DECODINGS = {"softmax": ["sample", "sample-top_p0.9", "greedy"],
             "1.5-relu": ["sample", "greedy", TUNED]}


@pytest.fixture(scope="module")
def study(tiny_lm_corpus, tiny_lm_config, tmp_path_factory):
    """A finished tiny study: softmax and 1.5-ReLU at seeds 1 and 2, one lr, a tau sweep."""
    base = tiny_lm_config(tiny_lm_corpus, tau="auto", max_steps=8, keep_every=4, warmup=4,
                          log_every=4, valid_every=4, save_every=4, max_minutes=0.0)
    lm = dataclasses.replace(base.lm_study, transforms=("softmax", "1.5-relu"), sweep_steps=4,
                             decodings=("sample", "sample-top_p0.9", "greedy"), prompts=5,
                             max_new_tokens=4, stride=8, bootstrap_samples=10,
                             tau_shifts=(0.0, 0.3))
    config = dataclasses.replace(base, lm_study=lm,
                                 sweep=dataclasses.replace(base.sweep, lr=(1.0,)),
                                 study=dataclasses.replace(base.study, seeds=(1, 2), kind="lm"))
    out, console, threads = tmp_path_factory.mktemp("lm-bench") / "study", Console(quiet=True), \
        torch.get_num_threads()
    torch.set_num_threads(1)
    run(config, out, Context(console, trainer(None, console), "test"))
    torch.set_num_threads(threads)
    return config, out


def test_one_row_per_model_decoding_and_batch(study, tmp_path, one_thread):
    _, out = study
    csv = tmp_path / "bench.csv"
    frame = B.bench_study(out, B.BenchPlan(batches=(1, 3), new_tokens=3, repeats=2,
                                           device="cpu"), csv)
    written = pd.read_csv(csv)
    assert list(written.columns) == list(frame.columns) and len(written) == len(frame)
    assert len(frame) == 2 * sum(map(len, DECODINGS.values()))
    for name, labels in DECODINGS.items():
        for batch in (1, 3):
            rows = frame[(frame["transform"] == name) & (frame["batch"] == batch)]
            assert list(rows["decoding"]) == labels
    assert (frame[["ms_per_token", "ms_per_step", "head_ms_per_token"]] > 0).all().all()
    assert list(frame["ms_per_step"]) == pytest.approx(list(frame["ms_per_token"]
                                                            * frame["batch"]))
    assert (frame["seed"] == 1).all() and (frame["new_tokens"] == 3).all()
    assert frame["checkpoint"].str.endswith("seed-1/steps/step-8.pt").all()
    sample = frame[(frame["transform"] == "softmax") & (frame["decoding"] == "sample")]
    assert (sample["ratio_to_softmax_sample"] == 1).all()
    assert (sample["head_ratio_to_softmax_sample"] == 1).all()
    top_p = frame[frame["decoding"] == "sample-top_p0.9"]
    assert (top_p["ratio_to_softmax_top_p"] == 1).all()
    assert frame["ratio_to_softmax_top_p"].notna().all()
    # the tuned decoding carries its dev-selected shift, in its column and its signature
    shift = selected_shift(out / "seeds" / "1.5-relu" / "seed-1")
    tuned = frame[frame["decoding"] == TUNED]
    assert (tuned["tau_shift"] == shift).all()
    assert tuned["signature"].str.contains("decoding:" + ("sample" if shift == 0
                                                          else f"sample-tau{shift:+g}")).all()
    greedy = frame[frame["decoding"] == "greedy"]
    assert (greedy["support"] == 1).all()
    assert (frame[frame["transform"] == "softmax"]["decoding"] != TUNED).all()
    assert frame["signature"].str.contains("bench:lm").all()
    assert frame["machine"].str.len().gt(0).all() and frame["other_cpu"].notna().all()


def test_the_report_picks_the_benchmark_up(study, one_thread):
    """``arelu report``: summary.csv's ms_per_token is the batch-1 full model's, and verdict
    (c) is measured."""
    config, out = study
    frame = B.bench_study(out, B.BenchPlan(batches=(2, 1), new_tokens=2, repeats=1,
                                           device="cpu"))
    assert (out / "bench_generate.csv").is_file()
    report = rebuild(out).read_text()
    summary = pd.read_csv(out / "summary.csv").set_index(["transform", "decoding"])
    one = frame[frame["batch"] == 1].set_index(["transform", "decoding"])
    for key in one.index:
        assert summary.loc[key, "ms_per_token"] == pytest.approx(one.loc[key, "ms_per_token"])
        assert summary.loc[key, "bench_batch"] == 1
    assert "bench_generate.csv is missing" not in report
    relu = one.loc[("1.5-relu", "sample"), "ms_per_token"]
    assert "(c) How fast is 1.5-ReLU (`1.5-relu`) sampling per token? " \
           f"{relu:.3f} ms per token at batch 1" in report


def test_errors_are_one_line(study, tmp_path):
    config, out = study
    plan = B.BenchPlan(batches=(1,), new_tokens=2, repeats=1, device="cpu")
    with pytest.raises(UserError, match="holds no study.json, so it is not a study's folder") \
            as err:
        B.bench_study(tmp_path, plan)
    shutil.copy(out / RECORD, tmp_path / RECORD)
    with pytest.raises(UserError, match="no trained seed model .* arelu study RECIPE"):
        B.bench_study(tmp_path, plan)
    with pytest.raises(UserError, match="--new-tokens 40 does not fit.*give --new-tokens 27"):
        B.bench_study(out, dataclasses.replace(plan, new_tokens=40))
    for bad, match in (({"repeats": 0}, "--repeats"), ({"batches": (0,)}, "--batches")):
        with pytest.raises(UserError, match=match):
            B.bench_study(out, dataclasses.replace(plan, **bad))
    assert "\n" not in str(err.value) and not (tmp_path / "bench_generate.csv").exists()


def test_a_model_of_another_vocabulary_is_refused(study, tmp_path, tiny_lm_config):
    """A seed run trained on another corpus (another tokenizer): refused, nothing written."""
    from arelu_cli.data.prepare import PrepareRequest, prepare
    from arelu_cli.train.loop import train

    _, out = study
    copy = tmp_path / "study"
    shutil.copytree(out / "seeds" / "softmax", copy / "seeds" / "softmax")
    shutil.copy(out / RECORD, copy / RECORD)
    other = tmp_path / "other-corpus"
    prepare(PrepareRequest("toy-lm", other, train_size=100, eval_size=10, seed=5))
    config = tiny_lm_config(other, transform="1.5-relu", tau="auto", max_steps=4, keep_every=4,
                            log_every=4, valid_every=4, save_every=4)
    train(config, copy / "seeds" / "1.5-relu" / "seed-1")
    with pytest.raises(UserError, match="is a model of another vocabulary"):
        B.bench_study(copy, B.BenchPlan(batches=(1,), new_tokens=2, repeats=1, device="cpu"))
    assert not (copy / "bench_generate.csv").exists()


def test_given_weights_replace_a_seed_runs_deleted_checkpoints(study, tmp_path, one_thread):
    """``--weights softmax=PATH``: a checkpoint of softmax seed 1's settings and last step is
    timed in place of the deleted ones; one of another step or other settings is refused."""
    _, out = study
    copy = tmp_path / "study"
    shutil.copytree(out, copy)
    seed_1 = copy / "seeds" / "softmax" / "seed-1"
    retrained, early = tmp_path / "retrain.pt", tmp_path / "early.pt"
    shutil.copy(seed_1 / "steps" / "step-8.pt", retrained)
    shutil.copy(seed_1.with_name("seed-2") / "steps" / "step-4.pt", early)  # trained to 8
    for folder in (copy / "seeds" / "softmax").glob("seed-*"):
        for path in [*folder.glob("*.pt"), *folder.glob("steps/*.pt")]:
            path.unlink()
    plan = B.BenchPlan(batches=(1,), new_tokens=2, repeats=1, device="cpu")
    assert set(B.bench_study(copy, plan, tmp_path / "alone.csv")["transform"]) == {"1.5-relu"}
    frame = B.bench_study(copy, dataclasses.replace(plan, weights=(("softmax", retrained),)))
    soft = frame[frame["transform"] == "softmax"]
    assert list(soft["decoding"]) == DECODINGS["softmax"] and (soft["seed"] == 1).all()
    assert (soft["checkpoint"] == "../retrain.pt").all()  # relative to the study folder
    assert (frame[frame["transform"] == "1.5-relu"]["checkpoint"]
            .str.endswith("seed-1/steps/step-8.pt").all())
    relu = out / "seeds" / "1.5-relu" / "seed-1" / "steps" / "step-8.pt"
    for given, message in ((early, "holds step 4, not the run's last step 8; give its "
                                   "steps/step-8.pt"),
                           (relu, "was trained with train.transform = \"1.5-relu\", but "
                                  "the study's run .* with \"softmax\"")):
        with pytest.raises(UserError, match=message):
            B.bench_study(copy, dataclasses.replace(plan, weights=(("softmax", given),)))
    for bad, message in ((["softmax"], "is not NAME=PATH"),
                         (["softmax=a.pt", "softmax=b.pt"], "names a transform twice")):
        with pytest.raises(UserError, match=message):
            B.parse_weights(bad)


def test_the_command_writes_its_csv_and_fails_in_one_line(study, cli, tmp_path, one_thread):
    _, out = study
    csv = tmp_path / "bench.csv"
    ran = cli("bench", "lm-study", out, "--batches", "1", "--new-tokens", "2", "--repeats", "1",
              "--device", "cpu", "--out", csv)
    assert ran.code == 0 and f"wrote {csv}" in ran.out.replace("\n", "")
    assert len(pd.read_csv(csv)) == sum(map(len, DECODINGS.values()))
    for args, message in (((tmp_path / "nothing",), "no results folder"),
                          ((out, "--batches", "1,x"), "--batches"),
                          ((out, "--weights", "softmax"), "is not NAME=PATH")):
        ran = cli("bench", "lm-study", *args, "--out", tmp_path / "bad.csv")
        assert ran.code == 2 and message in ran.err
        assert len(ran.err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.csv").exists()
