"""The tuned study's computed verdicts: the pairs compared, better / worse / inconclusive by
the one verdict rule, and the convergence trend."""

from __future__ import annotations

from arelu_cli.config import load_config
from arelu_cli.studies.tuned.claims import answer, pairs


def _config(**study):
    overrides = {("sweep", "transforms"): ["softmax", "1.5-relu"], ("train", "max_steps"): 1200,
                 ("study", "borrow"): ["1.5-entmax-k100=1.5-relu"]}
    overrides |= {("study", k): v for k, v in study.items()}
    return load_config(None, overrides)


def _row(delta, low, high, p, comparison="equal_time", transform="1.5-relu",
         baseline="softmax", seeds="joined"):
    return {"comparison": comparison, "transform": transform, "baseline": baseline,
            "seeds": seeds, "delta": delta, "delta_low": low, "delta_high": high, "p_value": p}


def test_every_transform_against_the_baseline_and_a_borrower_against_its_lender():
    names = ["softmax", "1.5-relu", "1.5-entmax-k100"]
    assert pairs(_config(), names) == [("1.5-relu", "softmax"), ("1.5-entmax-k100", "softmax"),
                                       ("1.5-entmax-k100", "1.5-relu")]
    # a borrower of the baseline is compared once; an absent lender not at all
    assert pairs(_config(borrow=["1.5-entmax-k100=softmax"]), names) == [
        ("1.5-relu", "softmax"), ("1.5-entmax-k100", "softmax")]
    assert pairs(_config(), ["softmax", "1.5-entmax-k100"]) == [("1.5-entmax-k100", "softmax")]


def _summary(comparison, name, mean, std, steps):
    return {"comparison": comparison, "transform": name, "n": 2, "mean": mean, "std": std,
            "per_seed": "", "seeds": "1 / 2", "steps": steps}


def test_the_answer_names_the_outcome_the_seeds_and_whether_convergence_closes_the_gap():
    config = _config(borrow=[], convergence_steps=3000)
    summary = [_summary("equal_steps", "softmax", 37.0, 0.5, "1200 / 1200"),
               _summary("equal_steps", "1.5-relu", 39.0, 0.4, "1200 / 1200"),
               _summary("convergence", "softmax", 40.0, None, "3000"),
               _summary("convergence", "1.5-relu", 40.3, None, "3000")]
    sig = [_row(2.0, 1.1, 2.9, 0.001, "equal_steps", seeds="joined"),
           _row(2.3, 1.0, 3.5, 0.001, "equal_steps", seeds="1"),
           _row(1.7, 0.1, 3.1, 0.08, "equal_steps", seeds="2"),
           _row(2.3, 1.0, 3.5, 0.001, "convergence_start", seeds="1"),
           _row(0.3, -0.8, 1.4, 0.3, "convergence", seeds="1")]
    (text,) = answer(config, summary, sig)
    assert text.startswith("**1.5-relu against softmax.** Equal steps (1.5-relu step 1,200, "
                           "softmax step 1,200): test BLEU 39.00 ± 0.40 against 37.00 ± 0.50")
    assert "Δ +2.00 [+1.10, +2.90], p = 0.001 on the 2 seeds' translations joined: **better**" \
        in text
    assert "per seed +2.30 / +1.70 (seeds 1 / 2), better or worse at 2 of 2" in text
    assert "Convergence (1.5-relu step 3,000, softmax step 3,000): test BLEU 40.30 against " \
           "40.00; Δ +0.30 [-0.80, +1.40], p = 0.300 (seed 1 only): **inconclusive**" in text
    assert text.endswith("At seed 1 (in the convergence runs), Δ +2.30 [+1.00, +3.50] "
                         "after 1,200 steps and +0.30 [-0.80, +1.40] after 3,000: "
                         "**the gap closes**.")
    assert answer(config, summary, []) == []


def test_the_convergence_trend_is_read_off_the_convergence_runs_themselves():
    # the seed-1 runs had a gap at 1,200; the convergence runs (trained again from step 0)
    # had none there: their own start decides, so the gap opens, not holds
    config = _config(borrow=[], convergence_steps=3000)
    summary = [_summary(c, n, 38.0, None, s) for c, s in
               (("equal_steps", "1200"), ("convergence_start", "1200"),
                ("convergence", "3000")) for n in ("softmax", "1.5-relu")]
    sig = [_row(2.3, 1.0, 3.5, 0.001, "equal_steps", seeds="1"),
           _row(0.4, -0.6, 1.4, 0.4, "convergence_start", seeds="1"),
           _row(1.9, 0.9, 2.9, 0.001, "convergence", seeds="1")]
    (text,) = answer(config, summary, sig)
    assert text.endswith("At seed 1 (in the convergence runs), Δ +0.40 [-0.60, +1.40] after "
                         "1,200 steps and +1.90 [+0.90, +2.90] after 3,000: **a gap opens**.")
    assert "Convergence run" not in text  # the start is the trend's, not a comparison of its own


def test_the_interval_decides_not_p():
    """p under 0.05 with an interval that includes 0 is inconclusive (the one verdict rule)."""
    config = _config(borrow=[], convergence_steps=0)
    summary = [_summary("equal_steps", n, 38.0, None, "1200") for n in ("softmax", "1.5-relu")]
    (text,) = answer(config, summary, [_row(0.5, -0.1, 1.1, 0.04, "equal_steps", seeds="1")])
    assert "**inconclusive**" in text
