"""``arelu bench generate``: time per generated token of one decoding step's output layer.

Sampling from alpha-ReLU is truncated already: no top-k selection, no top-p sort, not even
softmax's max and exp. Each case (vocabulary V, batch B, width d) times ``steps`` steps of
the output layer alone, ``(B, d) @ W.T`` then :func:`arelu_cli.decode.sampling.next_tokens`,
for every method on the same weights and hidden states: ``softmax-sample`` (baseline of
``ratio_to_softmax_sample``), ``softmax-top_k<k>``, ``softmax-top_p<p>`` (baseline of
``ratio_to_softmax_top_p``), ``sparsemax-sample``, ``<a>-entmax-sample``,
``<a>-relu-sample``; the ``select_*`` columns time the selection alone on the same logits.

Each repeat times every method once in a rotated order; a ratio is the median over repeats
of the method's time over the baseline's of the same repeat. Synthetic ``W ~ N(0, s^2 / d)``
and hidden states ``N(0, 1)`` give logits ``N(0, s^2)`` (``--logit-std s``) and alpha-ReLU
the analytic tau for V and s; ``--checkpoint`` takes ``W`` (and tau) from a trained model.

Targets (``meets_targets`` of alpha-ReLU's rows): at most 0.5x softmax top-p's time per
token and at most 1.0x pure sampling's, at V = 50K and B = 32; checked here, never by a
timed test.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from arelu_cli.bench import timing
from arelu_cli.util.errors import UserError
from arelu_cli.decode.sampling import Decoding, next_tokens, sampling_probs
from arelu_cli.util.options import parse_list
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.util.signatures import machine, signature
from arelu_cli.util.results import write_rows
from arelu_cli.transforms.tau import analytic_tau
from arelu_cli.transforms.checks import check_alpha

SAMPLE, TOP_P = "softmax-sample", "softmax-top_p"
TARGETS = {"ratio_to_softmax_top_p": 0.5, "ratio_to_softmax_sample": 1.0}
"""alpha-ReLU sampling's time per token over each baseline's, at most."""


@dataclass(frozen=True)
class GeneratePlan:
    vocabs: tuple[int, ...] = (10000, 50000)
    batches: tuple[int, ...] = (1, 32)
    width: int = 512
    steps: int = 20
    repeats: int = 15
    top_k: int = 50
    top_p: float = 0.9
    alpha: float = 1.5
    logit_std: float = 2.0
    device: str = "cpu"
    checkpoint: Path | None = None
    seed: int = 0


def make_plan(quick: bool = False, vocabs: str | None = None, batches: str | None = None,
              width: int | None = None, steps: int | None = None, repeats: int | None = None,
              top_k: int = 50, top_p: float = 0.9, alpha: float = 1.5, logit_std: float = 2.0,
              device: str = "auto", checkpoint: Path | None = None) -> GeneratePlan:
    """Resolve the command-line options; bad values raise :class:`UserError`."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise UserError(f"--device must be cpu, cuda or auto (and cuda needs a GPU), got {device!r}")
    try:
        Decoding(top_k=top_k, top_p=top_p)
        alpha = check_alpha(alpha)
    except ValueError as err:
        raise UserError(f"--top-k/--top-p/--alpha: {err}") from None
    if not logit_std > 0:
        raise UserError(f"--logit-std must be positive, got {logit_std}")
    for name, value in (("--d", width), ("--steps", steps), ("--repeats", repeats)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    sizes = {name: parse_list(text, int, name, example=example) if text else None
             for name, text, example in (("--vocabs", vocabs, "10000,50000"),
                                         ("--batches", batches, "1,32"))}
    for name, values in sizes.items():
        if values is not None and min(values) < 1:
            raise UserError(f"{name} must list positive sizes, got {values}")
    if checkpoint is not None and sizes["--vocabs"]:
        raise UserError("--vocabs does not apply with --checkpoint, whose output layer fixes V")
    return GeneratePlan(
        vocabs=tuple(sizes["--vocabs"] or ((1000,) if quick else GeneratePlan.vocabs)),
        batches=tuple(sizes["--batches"] or ((1, 4) if quick else GeneratePlan.batches)),
        width=width or (32 if quick else 512), steps=steps or (2 if quick else 20),
        repeats=repeats or (3 if quick else 15), top_k=top_k, top_p=top_p, alpha=alpha,
        logit_std=logit_std, device=device, checkpoint=checkpoint)


def methods(plan: GeneratePlan, tau: float) -> dict[str, tuple[OutputTransform, Decoding]]:
    """Every timed method by name: its transform (alpha-ReLU at ``tau``) and decoding."""
    a = f"{plan.alpha:g}"
    return {SAMPLE: (get_transform("softmax"), Decoding()),
            f"softmax-top_k{plan.top_k}": (get_transform("softmax"), Decoding(top_k=plan.top_k)),
            f"{TOP_P}{plan.top_p:g}": (get_transform("softmax"), Decoding(top_p=plan.top_p)),
            "sparsemax-sample": (get_transform("sparsemax"), Decoding()),
            f"{a}-entmax-sample": (get_transform(f"{a}-entmax"), Decoding()),
            f"{a}-relu-sample": (get_transform(f"{a}-relu", tau=tau), Decoding())}


def output_layer(plan: GeneratePlan, vocab: int | None
                 ) -> tuple[torch.Tensor, torch.Tensor | None, float, str]:
    """``(W (V, d), bias or None, tau, source)``: synthetic (module docstring) or the
    ``--checkpoint``'s output layer."""
    device = torch.device(plan.device)
    if plan.checkpoint is None:
        gen = torch.Generator().manual_seed(plan.seed)
        weight = torch.randn(vocab, plan.width, generator=gen) * (plan.logit_std / plan.width ** 0.5)
        tau = analytic_tau(vocab, sigma=plan.logit_std, alpha=plan.alpha).tau
        return weight.to(device), None, tau, f"randn{vocab}x{plan.width}-std{plan.logit_std:g}"
    from arelu_cli.model.checkpoint import load

    ckpt = load(plan.checkpoint)
    state = ckpt["average"] if ckpt.get("average") is not None else ckpt["model"]
    if "output.weight" not in state:
        raise UserError(f"{plan.checkpoint} has no output layer (output.weight); give a "
                        "checkpoint that arelu train wrote")
    weight, bias = state["output.weight"].float(), state.get("output.bias")
    own = get_transform(ckpt["transform"], tau=ckpt["tau"] or 0.0)
    if own.family == "relu" and own.alpha == plan.alpha:
        tau = own.tau
    else:
        tau = analytic_tau(weight.shape[0], d_model=weight.shape[1], alpha=plan.alpha).tau
    return (weight.to(device), None if bias is None else bias.float().to(device), tau,
            str(plan.checkpoint))


def step_loop(hidden: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
              transform: OutputTransform, decoding: Decoding, seed: int) -> Callable:
    """A call that decodes ``len(hidden)`` steps: the projection ``hidden[t] @ weight.T``
    and next-token selection; with ``weight`` None, ``hidden`` holds the steps' logits and
    the call times the selection alone."""
    generator = torch.Generator(device=hidden.device)

    def run(_state: object) -> None:
        generator.manual_seed(seed)
        for h in hidden:
            logits = h if weight is None else F.linear(h, weight, bias)
            next_tokens(logits, transform, decoding, generator)
    return run


def support(logits: torch.Tensor, transform: OutputTransform, decoding: Decoding) -> float:
    """Mean number of tokens of positive probability per row of one step's ``logits``."""
    return float((sampling_probs(logits, transform, decoding) > 0).sum(-1).float().mean())


def interleaved(loops: dict[str, Callable], repeats: int, device: torch.device,
                log=None, setups: dict[str, Callable[[], object]] | None = None
                ) -> tuple[dict[str, list[float]], float | None]:
    """Milliseconds of each loop per repeat, every loop once per repeat in an order rotated
    from repeat to repeat, after one warm-up call each; and the other processes' load. A
    loop named in ``setups`` is called on its setup's result, made untimed before each call."""
    names, setups = list(loops), setups or {}
    untimed = {name: setups.get(name, lambda: None) for name in names}
    for name in names:                       # warm-up (and the C++/compile builds)
        loops[name](untimed[name]())
    times: dict[str, list[float]] = {name: [] for name in names}
    with timing.OtherLoad() as load:
        for r in range(repeats):
            if log:
                log(f"repeat {r + 1}/{repeats}")
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(timing.time_once(loops[name], untimed[name], device))
    return times, load.cores


def paired(ms: list[float], base: list[float]) -> float:
    """The median over repeats of ``ms``'s time over ``base``'s in the same repeat."""
    return statistics.median(a / b for a, b in zip(ms, base))


def case_rows(plan: GeneratePlan, vocab: int | None, batch: int, log=None) -> list[dict]:
    """The rows of one V x B case: every method, paired and interleaved (module docstring);
    ``select_*`` columns time the selection alone, on the same steps' precomputed logits."""
    device = torch.device(plan.device)
    weight, bias, tau, source = output_layer(plan, vocab)
    vocab, width = weight.shape
    gen = torch.Generator().manual_seed(plan.seed + 1)
    hidden = torch.randn(plan.steps, batch, width, generator=gen).to(device)
    logits = F.linear(hidden, weight, bias)                  # (steps, B, V)
    chosen = methods(plan, tau)
    loops = {}
    for name, (t, d) in chosen.items():
        loops[name] = step_loop(hidden, weight, bias, t, d, plan.seed)
        loops[f"select:{name}"] = step_loop(logits, None, None, t, d, plan.seed)
    times, other_cpu = interleaved(loops, plan.repeats, device,
                                   log and (lambda m: log(f"V={vocab} B={batch}: {m}")))
    top_p = f"{TOP_P}{plan.top_p:g}"
    rows = []
    for name, (transform, decoding) in chosen.items():
        ms, select = times[name], times[f"select:{name}"]
        row = dict(method=name, transform=transform.name, decoding=decoding.label(), v=vocab,
                   batch=batch, d=width, steps=plan.steps, repeats=plan.repeats,
                   alpha=transform.alpha, tau=transform.tau, source=source,
                   ms_per_step=statistics.median(ms) / plan.steps,
                   us_per_token=1000 * statistics.median(ms) / (plan.steps * batch),
                   ratio_to_softmax_sample=paired(ms, times[SAMPLE]),
                   ratio_to_softmax_top_p=paired(ms, times[top_p]),
                   select_us_per_token=1000 * statistics.median(select) / (plan.steps * batch),
                   select_ratio_to_softmax_sample=paired(select, times[f"select:{SAMPLE}"]),
                   select_ratio_to_softmax_top_p=paired(select, times[f"select:{top_p}"]),
                   support=support(logits[0], transform, decoding))
        row["meets_targets"] = (all(row[k] <= v for k, v in TARGETS.items())
                                if transform.family == "relu" else None)
        row |= dict(device=plan.device, machine=machine(device),
                    threads=torch.get_num_threads(), other_cpu=other_cpu,
                    ms_all=" ".join(f"{x:.4g}" for x in ms),
                    select_ms_all=" ".join(f"{x:.4g}" for x in select))
        row["signature"] = signature(transform=transform.name, alpha=transform.alpha,
                                     tau=transform.tau, data=source, seed=plan.seed,
                                     decoding=decoding.label(), v=vocab, batch=batch, d=width,
                                     steps=plan.steps, repeats=plan.repeats,
                                     device=plan.device, threads=torch.get_num_threads())
        rows.append(row)
    return rows


def run(plan: GeneratePlan, out: Path, log=None) -> pd.DataFrame:
    """Every case of ``plan``; the CSV is rewritten (atomically) after each case."""
    rows: list[dict] = []
    for vocab in ((None,) if plan.checkpoint else plan.vocabs):
        for batch in plan.batches:
            rows += case_rows(plan, vocab, batch, log)
            write_rows(rows, out)
    return pd.DataFrame(rows)


def print_table(frame: pd.DataFrame, console: Console) -> None:
    table = Table(title="time per generated token (output layer + next-token selection)")
    for col in ("method", "V", "B", "support", "us/token", "x sample", "x top-p", "targets",
                "select us/token", "x sample", "x top-p"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in frame.to_dict("records"):
        met = r["meets_targets"]
        table.add_row(r["method"], str(r["v"]), str(r["batch"]), f"{r['support']:.0f}",
                      f"{r['us_per_token']:.1f}", f"{r['ratio_to_softmax_sample']:.2f}",
                      f"{r['ratio_to_softmax_top_p']:.2f}",
                      "" if met is None or pd.isna(met) else ("met" if met else "MISSED"),
                      f"{r['select_us_per_token']:.1f}",
                      f"{r['select_ratio_to_softmax_sample']:.2f}",
                      f"{r['select_ratio_to_softmax_top_p']:.2f}")
    console.print(table)
