"""The conversion study's verdicts, computed from its tables alone (``summary.csv``,
``ratios.csv``, ``significance.csv``; :mod:`~arelu_cli.studies.convert.tables`), each by the one
verdict rule (:func:`arelu_cli.studies.verdict.verdict`) over a bootstrap row:

* **steps to within 2%**: per converted arm, the first evaluated step at which the 95%
  interval of its pure sampling's epsilon-perplexity over the control's (per seed, mean over
  seeds) lies under ``1 +`` :data:`~arelu_cli.studies.convert.tables.WITHIN`; else the gap
  left at its last evaluated step, and whether that gap is resolved;
* **tau rules**: ``relu-tau_dev`` and ``relu-analytic`` over ``relu-tau_for``, at step 0
  (exact: the pretrained weights with each tau) and at the last step; "the analytic tau is
  wrong for a trained model" holds when it is worse at the last step;
* **non-degenerate**: each converted arm's pure sampling against the control's nucleus
  sampling at the last step both have, on distinct-2, loop share and Zipf gap, by the
  paired bootstrap over test prompts (:func:`arelu_cli.studies.generations.degeneracy`);
* **LoRA suffices**: LoRA's epsilon-perplexity over the full fine-tune's at its tau rule,
  under ``1 + WITHIN`` at the last step;
* the scratch reference and the pretrained model's test perplexity, stated.

A verdict whose rows are missing says "not measured yet".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arelu_cli.studies.convert.tables import (CONTROL, CONTROL_Q, LORA_Q, NUCLEUS, PURE,
                                              RULE_Q, SPARSE, WITHIN)
from arelu_cli.studies.generations import HUMAN, degeneracy
from arelu_cli.studies.markdown import fmt, missing
from arelu_cli.studies.verdict import BETTER, SAME, WORSE, verdict

NOT_YET = "not measured yet"
READING = ("Intervals: an ε-perplexity ratio pairs each fine-tuning seed's arm with the "
           "control (or baseline) of the same seed (the same batches and dropout draws), and "
           "its 95% interval resamples the seeds by the one bootstrap (with three seeds it "
           "spans about their range; one seed gives none); step 0 compares two fixed models "
           "evaluated once and is exact. Generation statistics are resampled over test "
           "prompts. Every verdict reads the interval, never p.")


def _rows(rows: Sequence[Mapping], **keys: object) -> list[Mapping]:
    return [r for r in rows if all(r.get(k) == v for k, v in keys.items())]


def ratio_text(row: Mapping) -> str:
    """``1.034× [1.021, 1.047]``; a ratio without an interval says why."""
    value, margin = row["value"], row["margin"]
    if missing(row["delta_low"]) or missing(row["delta_high"]):
        return f"{value:.3f}× (seed {row['seeds']} alone: no interval)"
    if row["seeds"] == "-":
        return f"{value:.3f}× (exact)"
    return (f"{value:.3f}× [{margin + row['delta_low']:.3f}, "
            f"{margin + row['delta_high']:.3f}]")


def _word(row: Mapping) -> str:
    return verdict(row, higher_is_better=False)


def _spread(summary: Sequence[Mapping], arm: str, step: int, metric: str = "eps_ppl",
            digits: int = 1) -> str:
    found = _rows(summary, arm=arm, step=step, decoding=PURE)
    if not found:
        return "-"
    mean, std = found[0][f"{metric}_mean"], found[0][f"{metric}_std"]
    return fmt(mean, digits) + ("" if missing(std) else f" ± {fmt(std, digits)}")


def convergence_verdict(arm: str, ratios: Sequence[Mapping], summary: Sequence[Mapping],
                        steps: int) -> str:
    """After how many steps is ``arm`` within ``WITHIN`` of the control (module docstring);
    ``steps``: the fine-tuning budget."""
    ask = (f"After how many fine-tuning steps is `{arm}` within {WITHIN:.0%} of the control's "
           "ε-perplexity?")
    rows = sorted(_rows(ratios, arm=arm, question=CONTROL_Q), key=lambda r: r["step"])
    if not rows:
        return f"{ask} {NOT_YET.capitalize()}."
    by_step = "; ".join(f"step {r['step']} {ratio_text(r)}" for r in rows)
    reached = next((r for r in rows if _word(r) == BETTER), None)
    last = rows[-1]
    row = reached or last
    values = (f"ε-perplexity {_spread(summary, arm, row['step'])} vs "
              f"{_spread(summary, CONTROL, row['step'])}")
    if reached is not None:
        answer = f"**at step {reached['step']}**: {values}, {ratio_text(reached)}"
    elif _word(last) == WORSE:
        answer = (f"**not within {last['step']} steps**: the gap left at step {last['step']} "
                  f"is {values}, {ratio_text(last)} ({last['value'] - 1:+.1%})")
    else:
        answer = f"**not resolved at step {last['step']}**: {values}, {ratio_text(last)}"
        if not missing(last["delta_low"]):
            answer += f", an interval that includes {1 + WITHIN:g}×"
    sofar = "" if last["step"] >= steps else f" (measured to step {last['step']} of {steps})"
    return f"{ask} {answer}{sofar}. By step: {by_step}."


def _at(rows: Sequence[Mapping], step: int) -> Mapping | None:
    return next((r for r in rows if r["step"] == step), None)


def _not_asked(ask: str, arm: str) -> str:
    return f"{ask} Not asked: the recipe trains no `{arm}` arm."


def tau_rule_verdicts(ratios: Sequence[Mapping], summary: Sequence[Mapping],
                      planned: Sequence[str]) -> list[str]:
    """``relu-tau_dev`` and ``relu-analytic`` against ``relu-tau_for`` (module docstring);
    ``planned``: the recipe's arms."""
    lines = []
    for arm, ask in (("relu-tau_dev", "Does τ chosen on dev beat `tau_for`?"),
                     ("relu-analytic", "Is the analytic τ wrong for a trained model (worse "
                                       "than `tau_for`)?")):
        rows = sorted(_rows(ratios, arm=arm, question=RULE_Q), key=lambda r: r["step"])
        if arm not in planned:
            lines.append(_not_asked(ask, arm))
            continue
        if not rows:
            lines.append(f"{ask} {NOT_YET.capitalize()}.")
            continue
        last, first = rows[-1], _at(rows, 0)
        word = _word(last)
        if arm == "relu-analytic":
            answer = {WORSE: "holds", BETTER: "does not hold", SAME: "does not hold"}.get(
                word, f"not resolved at step {last['step']}")
        else:
            answer = {BETTER: "yes", WORSE: "no: it is worse", SAME: "no: dev chose `tau_for`"
                      }.get(word, f"not resolved at step {last['step']}")
        start = "" if first is None or first is last else \
            f"; at step 0 (the pretrained weights) {ratio_text(first)}"
        found = _rows(summary, arm=arm, step=last["step"], decoding=PURE)
        tau = f" (τ {fmt(found[0]['tau'], 3)})" if found else ""
        base = _rows(summary, arm="relu-tau_for", step=last["step"], decoding=PURE)
        other = f" (τ {fmt(base[0]['tau'], 3)})" if base else ""
        lines.append(
            f"{ask} **{answer}**: `{arm}`{tau} over `relu-tau_for`{other} at step "
            f"{last['step']}: ε-perplexity {ratio_text(last)}{start}; support "
            f"{_spread(summary, arm, last['step'], 'support_mean', 0)} vs "
            f"{_spread(summary, 'relu-tau_for', last['step'], 'support_mean', 0)}, "
            f"zero-probability share {_spread(summary, arm, last['step'], 'zero_share', 3)} "
            f"vs {_spread(summary, 'relu-tau_for', last['step'], 'zero_share', 3)}.")
    return lines


def degeneracy_verdicts(sig: Sequence[Mapping], arms: Sequence[str]) -> list[str]:
    """Each converted arm's pure sampling against the control's nucleus sampling at the last
    step both have (module docstring)."""
    lines = []
    for arm in arms:
        ask = (f"Is pure sampling from `{arm}` as non-degenerate as the control's nucleus "
               f"sampling (`{NUCLEUS}`)?")
        mine = _rows(sig, arm=arm, decoding=PURE)
        if not mine:
            lines.append(f"{ask} {NOT_YET.capitalize()}: needs both evaluations at one step "
                         f"and {HUMAN}.")
            continue
        step = max(r["step"] for r in mine)
        rows = {r["statistic"]: r for r in mine if r["step"] == step}
        found = degeneracy(rows)
        if found is None:
            lines.append(f"{ask} {NOT_YET.capitalize()} at step {step}.")
            continue
        answer, parts = found
        one = next(iter(rows.values()))
        lines.append(f"{ask} **{answer}** at step {step}: {'; '.join(parts)}; paired bootstrap "
                     f"over {one['prompts']} test prompts, {one['samples']} resamples, seeds "
                     f"{one['seeds']} vs {one['baseline_seeds']}.")
    return lines


def lora_verdict(ratios: Sequence[Mapping], planned: Sequence[str]) -> str:
    ask = (f"Does LoRA suffice (its ε-perplexity within {WITHIN:.0%} of the full fine-tune's "
           "at its τ rule)?")
    if "relu-lora" not in planned:
        return _not_asked(ask, "relu-lora")
    rows = sorted(_rows(ratios, arm="relu-lora", question=LORA_Q), key=lambda r: r["step"])
    if not rows:
        return f"{ask} {NOT_YET.capitalize()}."
    last = rows[-1]
    answer = {BETTER: "holds", WORSE: "does not hold"}.get(
        _word(last), f"not resolved at step {last['step']}")
    return (f"{ask} **{answer}**: `relu-lora` over `{last['baseline']}` at step "
            f"{last['step']}: ε-perplexity {ratio_text(last)}.")


def scratch_line(ratios: Sequence[Mapping], summary: Sequence[Mapping]) -> str | None:
    """The 1.5-ReLU model trained from scratch for the same total steps, beside the control
    (None where the recipe trains none)."""
    rows = _rows(ratios, arm="scratch")
    if not rows:
        return None
    r = rows[-1]
    return (f"The 1.5-ReLU model trained from scratch for the same {r['step']} steps in all "
            f"(seed {r['seeds']}): ε-perplexity {_spread(summary, 'scratch', r['step'])} vs the "
            f"control's {_spread(summary, CONTROL, r['baseline_step'])} at step "
            f"{r['baseline_step']}, {ratio_text(r)}.")


def pretrained_line(summary: Sequence[Mapping],
                    reference: tuple[float, float | None, str] | None) -> str:
    """The pretrained model's test perplexity, beside ``reference`` (an LM study's softmax
    model: mean, std over seeds, where it comes from) where given."""
    rows = _rows(summary, arm="pretrained", decoding=PURE)
    if not rows:
        return f"The pretrained softmax model's test perplexity: {NOT_YET}."
    beside = "" if reference is None else (
        f", against the LM study's softmax model's {reference[0]:.1f}"
        + ("" if reference[1] is None else f" ± {reference[1]:.1f}") + f" ({reference[2]})")
    return (f"The pretrained softmax Llama's test perplexity is "
            f"**{fmt(rows[0]['ppl_mean'], 1)}** (windows of stride {int(rows[0]['stride'])})"
            f"{beside}.")


def answer(summary: Sequence[Mapping], ratios: Sequence[Mapping], sig: Sequence[Mapping],
           planned: Sequence[str], steps: int,
           reference: tuple[float, float | None, str] | None) -> list[str]:
    """Every verdict line, in the order of the study's questions; ``planned``: the recipe's
    arms, ``steps``: its fine-tuning budget."""
    arms = [arm for arm in SPARSE if arm in planned]
    scratch = scratch_line(ratios, summary)
    return [pretrained_line(summary, reference),
            *(convergence_verdict(arm, ratios, summary, steps) for arm in arms),
            *tau_rule_verdicts(ratios, summary, planned), *degeneracy_verdicts(sig, arms),
            lora_verdict(ratios, planned), *([scratch] if scratch else []), READING]
