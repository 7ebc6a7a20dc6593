"""Paired bootstrap resampling of BLEU: the same numbers as sacrebleu's ``--paired-bs`` on a
fixed example, p = 1 for identical systems, a small p for a system better everywhere."""

import dataclasses

import numpy as np
import pytest
from sacrebleu.significance import PairedTest

from arelu_cli.analysis import significance as sig
from arelu_cli.decode.bleu import bleu_chrf, paper_bleu
from arelu_cli.util.errors import UserError

REFS = ["the cat sat on the mat", "a red car drove by the house", "hello world how are you",
        "good morning to you all", "it is raining again today", "we went to the beach",
        "she reads a long book", "the children play in the park"]
BASE = ["the cat sat on a mat", "a blue bus drove by", "hello world how are you",
        "good morning to you", "it rains today", "we go to the beach",
        "she reads a book", "children play in a park"]
SYSTEM = ["the cat is on the mat", "a red car drove by the house", "hello there",
          "good morning to you all", "it is raining", "we went to the sea",
          "she reads the long book", "the children play in the park"]


def _sacrebleu(monkeypatch, systems, seed):
    monkeypatch.setenv("SACREBLEU_SEED", str(seed))
    named = [("base", BASE), *systems.items()]
    _, scores = PairedTest(named, {"BLEU": paper_bleu()}, [REFS], test_type="bs",
                           n_samples=sig.RESAMPLES)()
    return dict(zip([n for n, _ in named], scores["BLEU"]))


@pytest.mark.parametrize("seed", [12345, 7])
def test_same_numbers_as_sacrebleu_paired_bs(monkeypatch, seed):
    theirs = _sacrebleu(monkeypatch, {"system": SYSTEM}, seed)
    ours = sig.compare_to_baseline(BASE, {"base": BASE, "system": SYSTEM}, REFS, seed=seed)
    for name in ("base", "system"):
        r = ours[name]
        assert r.bleu == theirs[name].score
        assert r.bleu_mean == pytest.approx(theirs[name].mean, abs=1e-9)
        assert (r.bleu_high - r.bleu_low) / 2 == pytest.approx(theirs[name].ci, abs=1e-9)
    assert ours["system"].p_value == theirs["system"].p_value
    assert 0.05 < ours["system"].p_value < 1  # 8 sentences decide nothing
    assert ours["system"].baseline_bleu == theirs["base"].score


def test_bleu_is_the_reported_bleu():
    ours = sig.compare_to_baseline(BASE, {"system": SYSTEM}, REFS)["system"]
    assert ours.bleu == bleu_chrf(SYSTEM, REFS)[0]
    assert ours.baseline_bleu == bleu_chrf(BASE, REFS)[0]
    assert ours.delta == pytest.approx(ours.bleu - ours.baseline_bleu)
    assert ours.delta_low <= ours.delta <= ours.delta_high
    assert ours.bleu_low <= ours.bleu <= ours.bleu_high
    assert (ours.samples, ours.bootstrap_seed, ours.sentences) == (1000, 12345, len(REFS))


def test_the_row_form_for_one_system():
    row = sig.paired_bootstrap(BASE, SYSTEM, REFS, samples=200, seed=5)
    same = sig.compare_to_baseline(BASE, {"s": SYSTEM}, REFS, samples=200, seed=5)["s"]
    assert row == dataclasses.asdict(same) and row["samples"] == 200


def test_identical_systems_are_not_significant(monkeypatch):
    (same,) = sig.compare_to_baseline(BASE, {"same": BASE}, REFS).values()
    assert same.p_value == 1.0 and same.delta == 0.0 and same.delta_low == same.delta_high == 0.0
    # sacrebleu counts ties as "more extreme" never, and calls this significant (documented)
    assert _sacrebleu(monkeypatch, {"same": BASE}, sig.SEED)["same"].p_value == 1 / 1001


def test_a_system_better_on_every_sentence_is_significant():
    refs = [f"sentence number {i} says the weather is fine today" for i in range(60)]
    worse = [f"number {i} weather fine" for i in range(60)]
    (better,) = sig.compare_to_baseline(worse, {"better": refs}, refs).values()
    assert better.bleu == pytest.approx(100.0) and better.p_value < 0.01
    assert better.delta_low > 0


def test_resampled_bleu_equals_summing_the_drawn_rows():
    metric = paper_bleu()
    stats = sig.sentence_stats(SYSTEM, REFS, metric)
    (indices,) = sig.bootstrap_chunks(len(REFS), samples=5, seed=3)
    direct = [sig.stats_bleu(stats[row].sum(0), metric) for row in indices]
    assert sig.resampled_bleu(stats, indices, metric) == pytest.approx(direct, abs=1e-4)
    assert indices.shape == (5, len(REFS))
    assert np.array_equal(indices, next(sig.bootstrap_chunks(len(REFS), 5, 3)))


def test_resamples_drawn_in_blocks_are_sacrebleus_one_draw(monkeypatch):
    """Blocks bound the memory (a huge --samples no longer allocates
    samples x N at once) and change no resample, so no result."""
    one = np.random.default_rng(12345).choice(len(REFS), size=(1000, len(REFS)), replace=True)
    before = sig.compare_to_baseline(BASE, {"s": SYSTEM}, REFS, samples=1000)["s"]
    monkeypatch.setattr(sig, "CHUNK", 7 * len(REFS) + 3)  # blocks of 7 rows, the last of 6
    blocks = list(sig.bootstrap_chunks(len(REFS), 1000, 12345))
    assert [len(b) for b in blocks] == [7] * 142 + [6]
    assert np.array_equal(np.concatenate(blocks), one)
    assert sig.compare_to_baseline(BASE, {"s": SYSTEM}, REFS, samples=1000)["s"] == before


@pytest.mark.parametrize("samples", [0, 100_000_000])
def test_a_number_of_resamples_out_of_bounds_is_one_line(samples):
    with pytest.raises(UserError, match=r"the bootstrap takes 1 to 1,000,000 resamples, got "):
        sig.paired_bootstrap(BASE, SYSTEM, REFS, samples=samples)


def test_interval95_cuts_25_of_1000_each_side():
    assert sig.interval95(np.arange(1000.0)[::-1]) == (25.0, 974.0)


def test_signature_names_resamples_and_seed():
    metric = paper_bleu()
    sig.compare_to_baseline(BASE, {"s": SYSTEM}, REFS, samples=10, metric=metric)
    text = sig.bootstrap_signature(metric, 1000, 12345)
    assert "bs:1000" in text and "seed:12345" in text and "tok:13a" in text


def test_bad_inputs_are_user_errors():
    with pytest.raises(UserError, match="line-aligned"):
        sig.compare_to_baseline(BASE, {"s": SYSTEM[:3]}, REFS)
    with pytest.raises(UserError, match="no sentences"):
        sig.compare_to_baseline([], {"s": []}, [])
    with pytest.raises(UserError, match="the bootstrap takes 1 to"):
        sig.compare_to_baseline(BASE, {"s": SYSTEM}, REFS, samples=0)


def test_seeds_joined_are_resampled_by_test_sentence():
    """Three runs that translate alike are one run's evidence, not three times more: the
    joined test gives the one-run interval and p, where resampling the 3 x N lines
    independently (the naive join) would narrow the interval."""
    one = sig.paired_bootstrap(BASE, SYSTEM, REFS, samples=300)
    joined = sig.paired_bootstrap(BASE * 3, SYSTEM * 3, REFS * 3, samples=300, runs=3)
    # the same draws give the same spread and p; only the resamples' mean BLEU may move a
    # little ("exp" smoothing of an n-gram order with no match divides by its total count),
    # and the intervals, re-centred by it, with it
    moved = ("bleu_mean", "delta_bias", "bleu_low", "bleu_high", "delta_low", "delta_high")
    for key in moved:
        assert joined[key] == pytest.approx(one[key], abs=0.1), key
    for low, high in (("bleu_low", "bleu_high"), ("delta_low", "delta_high")):
        assert joined[high] - joined[low] == pytest.approx(one[high] - one[low])
    assert {k: v for k, v in joined.items() if k not in moved} == {
        k: v for k, v in one.items() if k not in moved}
    naive = sig.paired_bootstrap(BASE * 3, SYSTEM * 3, REFS * 3, samples=300)
    assert naive["bleu"] == pytest.approx(joined["bleu"]) and naive["sentences"] == 3 * 8
    assert naive["delta_high"] - naive["delta_low"] < 0.8 * (joined["delta_high"]
                                                             - joined["delta_low"])


def test_joined_runs_sum_each_sentence_over_the_runs():
    metric = paper_bleu()
    other = [s.replace("the", "a") for s in SYSTEM]
    stats = sig.run_stats(SYSTEM + other, REFS * 2, metric, runs=2)
    assert (stats == sig.sentence_stats(SYSTEM, REFS, metric)
            + sig.sentence_stats(other, REFS, metric)).all()
    # the corpus BLEU is that of every line, as when the runs are simply concatenated
    row = sig.paired_bootstrap(BASE * 2, SYSTEM + other, REFS * 2, samples=50, runs=2)
    assert row["bleu"] == pytest.approx(bleu_chrf(SYSTEM + other, REFS * 2)[0])
    with pytest.raises(UserError, match="do not split into 3 runs"):
        sig.paired_bootstrap(BASE * 2, SYSTEM * 2, REFS * 2, runs=3)


def test_the_interval_rule_recentres_the_percentile_interval_on_the_observed_value():
    """A resampled statistic biased low (distinct-n drawn with replacement): the plain
    percentile interval misses the observed value, the rule's interval is centred on it and
    keeps the spread."""
    draws = np.random.default_rng(0).normal(0.70, 0.01, 1000)  # observed 0.75
    plain = sig.interval95(draws)
    low, high = sig.interval(draws, 0.75)
    assert plain[1] < 0.75 < high and low < 0.75
    assert high - low == pytest.approx(plain[1] - plain[0])
    assert (low + high) / 2 == pytest.approx(0.75, abs=0.002)


def test_paired_gives_the_difference_its_interval_bias_and_p():
    rng = np.random.default_rng(1)
    base = rng.normal(10.0, 0.5, 1000)
    system = base + 1.0 + rng.normal(0.0, 0.1, 1000)
    row = sig.paired(system, base, 11.5, 10.0)
    assert row["delta"] == 1.5 and row["delta_low"] < 1.5 < row["delta_high"]
    assert row["delta_bias"] == pytest.approx((system - base).mean() - 1.5)
    assert row["delta_low"] > 0 and row["p_value"] == pytest.approx(1 / 1001)
    broken = sig.paired(np.full(1000, np.nan), base, 1.0, 10.0)
    assert broken["delta_low"] is broken["delta_high"] is broken["p_value"] is None
