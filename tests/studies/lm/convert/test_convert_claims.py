"""The conversion study's verdicts on hand-made table rows."""

from __future__ import annotations

import pytest

from arelu_cli.studies.lm.convert import claims as C


def row(arm, step, eps_ppl, std=None, decoding="sample", **extra):
    return {"arm": arm, "step": step, "decoding": decoding, "eps_ppl": eps_ppl,
            "eps_ppl_std": std, "tau": 1.0, "support_mean": 100.0, "zero_share": 0.1,
            **extra}


def evals(arm, step, values):
    return [{"arm": arm, "step": step, "decoding": "sample", "eval_seed": s, "eps_ppl": v}
            for s, v in enumerate(values, 1)]


@pytest.mark.parametrize("relu, expected", [
    ((150.0, 120.0, 101.0), "**at step 100**"),       # 101 <= 1.02 * 100
    ((150.0, 120.0, 103.0), "**not within 100 steps**"),
    ((101.0, 101.5, 101.9), "**at step 0**"),
])
def test_convergence_is_the_first_step_within_two_percent(relu, expected):
    summary = [row("softmax", s, 100.0) for s in (0, 50, 100)]
    summary += [row("relu-tau_for", s, v) for s, v in zip((0, 50, 100), relu)]
    text = C.convergence_verdict(summary, [], "relu-tau_for")
    assert expected in text


def test_the_gap_names_per_seed_ratios():
    summary = [row("softmax", 100, 100.0, 1.0), row("relu-tau_for", 100, 110.0, 2.0)]
    found = evals("softmax", 100, [99.0, 101.0]) + evals("relu-tau_for", 100, [108.9, 111.1])
    text = C.convergence_verdict(summary, found, "relu-tau_for")
    assert "per seed 1.100 ± 0.000×" in text


@pytest.mark.parametrize("analytic, std, word", [
    (130.0, 2.0, "**holds**"), (101.0, 2.0, "**not resolved**"), (90.0, 2.0, "**does not hold**")])
def test_the_analytic_tau_is_wrong_only_beyond_the_seeds_spread(analytic, std, word):
    summary = [row("softmax", 100, 100.0), row("relu-tau_for", 100, 100.0, std),
               row("relu-analytic", 100, analytic, std)]
    lines = C.tau_rule_verdicts(summary)
    assert word in lines[-1]
    assert "not measured yet" in lines[0]               # no relu-tau_dev rows


def test_lora_suffices_within_two_percent_of_its_rule():
    summary = [row("softmax", 100, 100.0), row("relu-tau_for", 100, 110.0),
               row("relu-lora", 100, 112.0)]
    assert "**holds**" in C.lora_verdict(summary, "relu-tau_for")
    summary[-1] = row("relu-lora", 100, 113.0)
    assert "**does not hold**" in C.lora_verdict(summary, "relu-tau_for")
    assert "not measured yet" in C.lora_verdict(summary, None)
