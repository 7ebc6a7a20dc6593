"""The conversion study's verdicts on hand-made table rows: each reads the 95% interval of a
bootstrap row by the one verdict rule."""

from __future__ import annotations

import pytest

from arelu_cli.studies.convert import claims as C
from arelu_cli.studies.convert.tables import CONTROL_Q, LORA_Q, RULE_Q, WITHIN


def ratio(arm, step, value, low=None, high=None, question=CONTROL_Q, seeds="1+2+3",
          baseline="softmax"):
    """A ratios.csv row: ``value`` with its interval [low, high] (None: no interval)."""
    margin = 1 + WITHIN if question != RULE_Q else 1.0
    return {"arm": arm, "step": step, "baseline": baseline, "baseline_step": step,
            "question": question, "margin": margin, "seeds": seeds, "value": value,
            "delta": value - margin,
            "delta_low": None if low is None else low - margin,
            "delta_high": None if high is None else high - margin}


def summary(arm, step, eps_ppl, std=None):
    return {"arm": arm, "step": step, "decoding": "sample", "eps_ppl_mean": eps_ppl,
            "eps_ppl_std": std, "tau": 1.0, "support_mean_mean": 100.0,
            "support_mean_std": None, "zero_share_mean": 0.1, "zero_share_std": None}


SUMMARY = [summary(a, s, 100.0) for a in ("softmax", "relu-tau_for") for s in (0, 50, 100)]


@pytest.mark.parametrize("at50, at100, expected", [
    ((1.05, 1.03, 1.06), (1.005, 1.0, 1.01), "**at step 100**"),
    ((1.05, 1.03, 1.06), (1.03, 1.025, 1.04), "**not within 100 steps**"),
    ((1.05, 1.03, 1.06), (1.019, 1.0, 1.03), "**not resolved at step 100**"),
    ((1.01, 1.00, 1.015), (1.2, 1.1, 1.3), "**at step 50**"),
])
def test_convergence_is_the_first_step_whose_interval_lies_within_two_percent(at50, at100,
                                                                                expected):
    ratios = [ratio("relu-tau_for", 0, 3.0, 3.0, 3.0, seeds="-"),
              ratio("relu-tau_for", 50, *at50), ratio("relu-tau_for", 100, *at100)]
    assert expected in C.convergence_verdict("relu-tau_for", ratios, SUMMARY, 100)


def test_one_seed_gives_no_interval_and_no_verdict():
    ratios = [ratio("relu-tau_for", 0, 3.0, 3.0, 3.0, seeds="-"),
              ratio("relu-tau_for", 50, 1.001, seeds="1")]
    text = C.convergence_verdict("relu-tau_for", ratios, SUMMARY, 100)
    assert "**not resolved at step 50**" in text and "seed 1 alone: no interval" in text
    assert "(measured to step 50 of 100)" in text
    assert "step 0 3.000× (exact)" in text


def test_the_gap_left_is_stated_with_its_interval():
    ratios = [ratio("relu-tau_for", 100, 1.5, 1.4, 1.6)]
    text = C.convergence_verdict("relu-tau_for", ratios, SUMMARY, 100)
    assert "**not within 100 steps**" in text and "1.500× [1.400, 1.600] (+50.0%)" in text


@pytest.mark.parametrize("interval, word", [
    ((1.3, 1.2, 1.4), "**holds**"), ((1.0, 0.9, 1.1), "**not resolved at step 100**"),
    ((0.8, 0.7, 0.9), "**does not hold**")])
def test_the_analytic_tau_is_wrong_only_when_its_interval_says_worse(interval, word):
    ratios = [ratio("relu-analytic", 100, *interval, question=RULE_Q, baseline="relu-tau_for")]
    lines = C.tau_rule_verdicts(ratios, SUMMARY, ["relu-tau_for", "relu-tau_dev",
                                                  "relu-analytic"])
    assert word in lines[-1]
    assert "Not measured yet" in lines[0]               # no relu-tau_dev rows
    assert "Not asked: the recipe trains no `relu-tau_dev` arm" in C.tau_rule_verdicts(
        ratios, SUMMARY, ["relu-tau_for", "relu-analytic"])[0]


@pytest.mark.parametrize("interval, word", [
    ((1.01, 1.0, 1.015), "**holds**"), ((1.05, 1.03, 1.07), "**does not hold**"),
    ((1.02, 1.0, 1.04), "**not resolved at step 100**")])
def test_lora_suffices_when_its_interval_lies_within_two_percent(interval, word):
    ratios = [ratio("relu-lora", 100, *interval, question=LORA_Q, baseline="relu-tau_for")]
    assert word in C.lora_verdict(ratios, ["relu-tau_for", "relu-lora"])
    assert "Not measured yet" in C.lora_verdict([], ["relu-tau_for", "relu-lora"])
    assert "Not asked" in C.lora_verdict(ratios, ["relu-tau_for"])


def sig(arm, stat, delta, low, high, step=100):
    return {"arm": arm, "step": step, "decoding": "sample", "statistic": stat, "value": 0.5,
            "baseline_value": 0.5 - delta, "delta": delta, "delta_low": low,
            "delta_high": high, "p_value": 0.01, "prompts": 500, "samples": 1000,
            "seeds": "1+2+3", "baseline_seeds": "1+2+3"}


def test_pure_sampling_is_as_non_degenerate_when_every_statistic_is_better():
    better = [sig("relu-tau_for", "distinct_2", 0.1, 0.05, 0.15),
              sig("relu-tau_for", "loop", -0.01, -0.02, -0.005),
              sig("relu-tau_for", "zipf_gap", -0.1, -0.2, -0.05)]
    assert "**holds** at step 100" in C.degeneracy_verdicts(better, ["relu-tau_for"])[0]
    worse = better[:2] + [sig("relu-tau_for", "zipf_gap", 0.1, 0.05, 0.2)]
    assert "**does not hold**" in C.degeneracy_verdicts(worse, ["relu-tau_for"])[0]
    earlier = [dict(r, step=50) for r in better] + better[:1]   # step 100 lacks two rows
    assert "Not measured yet at step 100" in C.degeneracy_verdicts(earlier, ["relu-tau_for"])[0]


def test_the_pretrained_perplexity_is_stated_beside_the_lm_studys():
    rows = [{"arm": "pretrained", "step": 0, "decoding": "sample", "ppl_mean": 120.14,
             "stride": 64}]
    line = C.pretrained_line(rows, (105.0, 0.2, "results/ptb-lm/summary.csv"))
    assert "**120.1**" in line and "105.0 ± 0.2" in line
    assert "not measured yet" in C.pretrained_line([], None)
