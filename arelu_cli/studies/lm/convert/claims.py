"""The conversion study's verdicts, computed from its tables alone (``lm_eval.csv`` rows,
``summary.csv``, ``significance.csv``; :mod:`~arelu_cli.studies.lm.convert.tables`):

* **steps to within 2%**: per sparse arm, the first evaluated step at which its pure
  sampling's epsilon-perplexity (mean over seeds) is within :data:`WITHIN` of the softmax
  control's at the same step, else the gap left at the last step (per-seed ratios, mean and
  sample std);
* **tau rules**: ``tau_for``, ``tau_dev`` and the analytic tau at the last step against each
  other on epsilon-perplexity (a difference within the larger std over seeds is not resolved);
  "the analytic tau is wrong for a trained model" holds when its arm is worse than
  ``tau_for``'s by more than that;
* **non-degenerate**: each sparse arm's pure sampling against the control's nucleus sampling
  at the last step, by the PTB study's rule over the paired bootstrap
  (:func:`arelu_cli.studies.lm.claims.degeneracy_verdict`, one verdict rule);
* **LoRA suffices**: LoRA's last-step epsilon-perplexity within :data:`WITHIN` of the full
  fine-tune at the same tau rule.

A verdict whose rows are missing says "not measured yet".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from arelu_cli.studies.markdown import fmt

WITHIN = 0.02
"""A converted model "reaches" the control at an epsilon-perplexity at most this much higher."""
CONTROL, PURE, NUCLEUS = "softmax", "sample", "sample-top_p0.9"
SPARSE = ("relu-tau_for", "relu-tau_dev", "relu-analytic", "entmax", "relu-lora")
RULES = ("relu-tau_for", "relu-tau_dev", "relu-analytic")
NOT_YET = "not measured yet"


def _row(summary: Sequence[dict], arm: str, step: int, decoding: str = PURE) -> dict | None:
    found = [r for r in summary if r["arm"] == arm and int(r["step"]) == step
             and r["decoding"] == decoding]
    return found[0] if found else None


def _mean_std(row: dict, metric: str, digits: int = 1) -> str:
    std = row.get(f"{metric}_std")
    return fmt(row[metric], digits) + ("" if std is None or std != std
                                       else f" ± {fmt(std, digits)}")


def steps_of(summary: Sequence[dict], arm: str) -> list[int]:
    return sorted({int(r["step"]) for r in summary if r["arm"] == arm})


def last_step(summary: Sequence[dict]) -> int | None:
    steps = steps_of(summary, CONTROL)
    return steps[-1] if steps else None


def seed_ratios(evals: Sequence[dict], arm: str, step: int) -> list[float]:
    """Per seed: the arm's pure-sampling epsilon-perplexity over the control's, same seed."""
    def by_seed(name: str) -> dict:
        return {int(r["eval_seed"]): float(r["eps_ppl"]) for r in evals
                if r["arm"] == name and int(r["step"]) == step and r["decoding"] == PURE
                and r["eval_seed"] == r["eval_seed"] and r["eval_seed"] is not None}
    mine, control = by_seed(arm), by_seed(CONTROL)
    return [mine[s] / control[s] for s in sorted(mine) if s in control]


def convergence_verdict(summary: Sequence[dict], evals: Sequence[dict], arm: str) -> str:
    ask = f"After how many steps is `{arm}` within {WITHIN:.0%} of the control's ε-perplexity?"
    reached, last = None, None
    for step in steps_of(summary, arm):
        mine, control = _row(summary, arm, step), _row(summary, CONTROL, step)
        if mine is None or control is None:
            continue
        last = (step, mine, control)
        if mine["eps_ppl"] <= (1 + WITHIN) * control["eps_ppl"]:
            reached = reached if reached is not None else (step, mine, control)
    if last is None:
        return f"{ask} {NOT_YET}."
    step, mine, control = reached or last
    ratios = seed_ratios(evals, arm, step)
    spread = (f" (per seed {statistics.fmean(ratios):.3f}"
              + (f" ± {statistics.stdev(ratios):.3f}" if len(ratios) > 1 else "") + "×)"
              if ratios else "")
    text = (f"ε-perplexity {_mean_std(mine, 'eps_ppl')} vs {_mean_std(control, 'eps_ppl')}"
            f" ({mine['eps_ppl'] / control['eps_ppl']:.3f}×{spread})")
    if reached:
        return f"{ask} **at step {step}**: {text}."
    return f"{ask} **not within {last[0]} steps**: at step {step} {text}."


def _resolved(a: dict, b: dict, metric: str = "eps_ppl") -> str:
    """``better`` / ``worse`` (a against b, lower is better) beyond the larger std, else
    ``not resolved``."""
    stds = [s for s in (a.get(f"{metric}_std"), b.get(f"{metric}_std")) if s == s and s]
    gap = a[metric] - b[metric]
    if not stds or abs(gap) <= max(stds):
        return "not resolved (within one std)"
    return "worse" if gap > 0 else "better"


def tau_rule_verdicts(summary: Sequence[dict]) -> list[str]:
    last = last_step(summary)
    rows = {arm: _row(summary, arm, last) for arm in RULES} if last else {}
    lines = []
    base = rows.get("relu-tau_for")
    for arm in ("relu-tau_dev", "relu-analytic"):
        mine = rows.get(arm)
        if base is None or mine is None:
            lines.append(f"`{arm}` against `relu-tau_for`: {NOT_YET}.")
            continue
        word = _resolved(mine, base)
        claim = ("Is the analytic τ wrong for a trained model? **"
                 + ("holds" if word == "worse" else "does not hold" if word == "better"
                    else "not resolved") + "**: " if arm == "relu-analytic" else "")
        lines.append(f"{claim}`{arm}` (τ {fmt(mine['tau'], 3)}) vs `relu-tau_for` "
                     f"(τ {fmt(base['tau'], 3)}) at step {last}: ε-perplexity "
                     f"{_mean_std(mine, 'eps_ppl')} vs {_mean_std(base, 'eps_ppl')} ({word}); "
                     f"support {fmt(mine['support_mean'], 0)} vs {fmt(base['support_mean'], 0)}"
                     f", zero-probability share {fmt(mine['zero_share'], 3)} vs "
                     f"{fmt(base['zero_share'], 3)}.")
    return lines


def degeneracy_verdicts(summary: Sequence[dict], sig: Sequence[dict]) -> list[str]:
    from arelu_cli.studies.lm.claims import degeneracy_verdict

    last = last_step(summary)
    at_last = [r for r in sig if last is not None and int(r["step"]) == last]
    return [degeneracy_verdict(arm, at_last, [], CONTROL, NUCLEUS) + f" (step {last})"
            for arm in SPARSE if _row(summary, arm, last or 0)]


def lora_verdict(summary: Sequence[dict], rule_arm: str | None) -> str:
    ask = (f"Does LoRA suffice (ε-perplexity within {WITHIN:.0%} of the full fine-tune at its "
           "τ rule)?")
    last = last_step(summary)
    lora = _row(summary, "relu-lora", last) if last else None
    full = _row(summary, rule_arm, last) if last and rule_arm else None
    if lora is None or full is None:
        return f"{ask} {NOT_YET}."
    ratio = lora["eps_ppl"] / full["eps_ppl"]
    word = "holds" if ratio <= 1 + WITHIN else "does not hold"
    return (f"{ask} **{word}**: `relu-lora` {_mean_std(lora, 'eps_ppl')} vs `{rule_arm}` "
            f"{_mean_std(full, 'eps_ppl')} ({ratio:.3f}×) at step {last}.")


def pretrained_line(summary: Sequence[dict], reference: tuple[float, float, str] | None) -> str:
    row = [r for r in summary if r["arm"] == "pretrained"]
    if not row:
        return f"The pretrained softmax model's test perplexity: {NOT_YET}."
    ppl = row[0]["ppl"]
    beside = ("" if reference is None else f", against the PTB study's softmax model's "
              f"{reference[0]:.1f} ± {reference[1]:.1f} (same split and stride, {reference[2]})")
    return (f"The pretrained softmax Llama's test perplexity is **{fmt(ppl, 1)}** (sliding "
            f"windows, stride {int(row[0]['stride'])}){beside}.")
