"""``arelu bench support``: how wide a trained model's entmax support is, and which partial
sort ``k`` makes its loss fastest.

The exact entmax losses (1.5-entmax and sparsemax) find the threshold from the ``k`` largest
logits of a row (``<a>-entmax-k<k>``) and, where the support fills all ``k``, sort again:
1.5-entmax once more, over as many as the top ``k``'s threshold lets into the support
(:mod:`arelu_cli.transforms._partial_sort`), sparsemax with ``2k``, ``4k`` ... (the entmax
package's doubling); a full sort is ``k = V``. So the fastest ``k`` depends on the model: an
untrained one keeps a few dozen tokens a row, a trained language model a thousand or more,
and a too small ``k`` sorts the rows it widens again. This bench
answers on the model's own rows:

* **rows**: ``--rows`` target positions of a split (default train), teacher-forced through the
  checkpoint's model with its dropout on, as training computes the loss (``--no-dropout``:
  eval mode, whose support is narrower): a language model's blocks of ``block_size`` tokens
  drawn with the seed, a translation model's reference sentences drawn with the seed;
* **support**: the number of tokens of positive probability in each row (the exact entmax of
  the alpha, full sort): mean, median, p90, p99, max, and the share of rows a given ``k``
  widens (support ``>= k``);
* **time**: the loss forward + backward on those rows (a fresh copy of the logits each call)
  for every ``k`` and the full sort, and ``F.cross_entropy`` on the same rows, every
  loss once per repeat in an order rotated from repeat to repeat
  (:func:`arelu_cli.bench.generate.interleaved`); ``ms`` is the median over repeats,
  ``ratio_to_cross_entropy`` the median over repeats of the paired ratio. ``fastest`` marks
  the row to train with.

Each row names its checkpoint and the optimizer ``step`` it was saved at (a ``last.pt`` is
overwritten as training goes on, so its name alone does not say which model was measured).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from arelu_cli.bench.generate import interleaved, paired
from arelu_cli.util.errors import UserError
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.util.results import write_rows
from arelu_cli.util.signatures import machine, signature

BASELINE = "cross_entropy"
DEFAULT_KS = (100, 256, 512, 1024, 2048, 4096)
PARTIAL_ALPHAS = (1.5, 2.0)
"""The alphas whose exact entmax has a partial sort (``<a>-entmax-k<k>``)."""


@dataclass(frozen=True)
class SupportPlan:
    checkpoint: Path
    data: Path | None = None
    split: str = "train"
    rows: int = 4096
    ks: tuple[int, ...] = DEFAULT_KS
    alpha: float | None = None
    repeats: int = 5
    seed: int = 0
    device: str = "cpu"
    dropout: bool = True
    """The model's dropout on, as training computes its loss (else eval mode)."""


def check_plan(plan: SupportPlan) -> None:
    """Bad options are a :class:`UserError`."""
    if plan.rows < 1:
        raise UserError(f"--rows must be at least 1, got {plan.rows}")
    if plan.repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {plan.repeats}")
    if not plan.ks or min(plan.ks) < 1:
        raise UserError(f"--k must list sizes of at least 1, got {list(plan.ks)}")
    if plan.alpha is not None and plan.alpha not in PARTIAL_ALPHAS:
        raise UserError(f"--alpha must be 1.5 (1.5-entmax) or 2 (sparsemax), the alphas with a "
                        f"partial sort, got {plan.alpha:g}")


def entmax_alpha(own: OutputTransform, alpha: float | None, path: Path) -> float:
    """The alpha to measure: ``alpha`` where given, else the checkpoint's own entmax's."""
    if alpha is not None:
        return alpha
    if own.family == "entmax" and own.alpha in PARTIAL_ALPHAS:
        return own.alpha
    raise UserError(f"{path} trained {own.name}, not 1.5-entmax or sparsemax; give --alpha 1.5 "
                    "or --alpha 2 to measure that entmax on its logits")


def batches(decoder, split: str, rows: int, seed: int):
    """Teacher-forced batches of about ``rows`` target positions of ``split`` (module
    docstring): a language model's seeded blocks, a translation model's seeded sentences."""
    data = decoder.data
    if decoder.config.data.task == "lm":
        from arelu_cli.data.blocks import block_lengths, collate_blocks, split_stream

        block = decoder.config.data.block_size
        tokens = split_stream(data, split)
        n_blocks = len(block_lengths(len(tokens), block))
        chosen = np.random.default_rng(seed).choice(n_blocks, size=min(n_blocks, -(-rows // block)),
                                                    replace=False)
        yield collate_blocks(tokens, np.sort(chosen), block, data.pad_id).to(decoder.device)
        return
    from arelu_cli.analysis.steps import split_batches

    order = np.random.default_rng(seed).permutation(len(data.split(split)))
    found = 0
    for start in range(0, len(order), 256):
        for batch in split_batches(decoder, split, np.sort(order[start:start + 256]), 4096):
            yield batch
            found += batch.n_tgt_tokens
            if found >= rows:
                return


@torch.no_grad()
def model_rows(decoder, split: str, rows: int, seed: int, dropout: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits (N, V) float32, targets (N,))``, ``N <= rows``, of the model on
    :func:`batches`, with its dropout as in training (seeded) or, without ``dropout``, in eval
    mode; NaN logits are a :class:`UserError`."""
    from arelu_cli.decode.search import refuse_nan

    logits, targets = [], []
    decoder.model.train(dropout)
    torch.manual_seed(seed)
    try:
        for batch in batches(decoder, split, rows, seed):
            keep = batch.tgt_out != decoder.data.pad_id
            logits.append(decoder.model(*batch.inputs, keep).float())
            targets.append(batch.tgt_out[keep])
    finally:
        decoder.model.eval()
    found = torch.cat(logits)[:rows]
    refuse_nan(found, "measuring its support")
    return found, torch.cat(targets)[:rows]


def support_sizes(logits: torch.Tensor, alpha: float) -> torch.Tensor:
    """Tokens of positive probability per row under the exact (fully sorted) alpha-entmax."""
    return (get_transform(f"{alpha:g}-entmax").probs(logits) > 0).sum(-1)


def losses(alpha: float, ks: tuple[int, ...], vocab: int) -> dict[str, OutputTransform]:
    """Every timed entmax loss by transform name: a partial sort at each ``k < V``, and the
    full sort."""
    names = [f"{alpha:g}-entmax-k{k}" for k in sorted(set(ks)) if k < vocab]
    return {name: get_transform(name) for name in names + [f"{alpha:g}-entmax"]}


def _backward(loss_fn):
    def run(state):
        z, y = state
        loss_fn(z, y).backward()
    return run


def measure(plan: SupportPlan, log=None) -> list[dict]:
    """The rows of the CSV (module docstring)."""
    from arelu_cli.decode.translate import open_checkpoint, resolve_checkpoint

    check_plan(plan)
    path = resolve_checkpoint(plan.checkpoint)
    decoder = open_checkpoint(path, plan.data, plan.device, task=None)
    if plan.split not in decoder.data.split_names:
        raise UserError(f"{decoder.data.path} has no split {plan.split!r}; it has "
                        f"{', '.join(decoder.data.split_names)}; pass --split with one of them")
    alpha = entmax_alpha(decoder.transform, plan.alpha, path)
    logits, target = model_rows(decoder, plan.split, plan.rows, plan.seed, plan.dropout)
    sizes = support_sizes(logits, alpha).double()
    vocab = logits.shape[-1]
    chosen = losses(alpha, plan.ks, vocab)
    loops = {name: _backward(t.loss) for name, t in chosen.items()}
    loops[BASELINE] = _backward(F.cross_entropy)

    def fresh():
        return logits.clone().requires_grad_(True), target

    times, other_cpu = interleaved(loops, plan.repeats, torch.device(plan.device),
                                   log, setups={name: fresh for name in loops})
    ms = {name: statistics.median(t) for name, t in times.items()}
    fastest = min(chosen, key=ms.__getitem__)
    quantile = {q: float(sizes.quantile(q)) for q in (0.5, 0.9, 0.99)}
    rows = []
    for name, t in [*chosen.items(), (BASELINE, None)]:
        k = vocab if t is None or t.k is None else t.k
        row = dict(checkpoint=str(path), step=decoder.step, trained=decoder.transform.name,
                   loss=name, alpha=alpha if t is not None else 1.0,
                   k=k if t is not None else None,
                   split=plan.split, dropout=plan.dropout, rows=len(target), v=vocab,
                   support_mean=float(sizes.mean()), support_median=quantile[0.5],
                   support_p90=quantile[0.9], support_p99=quantile[0.99],
                   support_max=int(sizes.max()),
                   widened=None if t is None else float((sizes >= k).double().mean())
                   if k < vocab else 0.0,
                   ms=ms[name], ratio_to_cross_entropy=paired(times[name], times[BASELINE]),
                   fastest=name == fastest if t is not None else None, repeats=plan.repeats,
                   device=plan.device, machine=machine(torch.device(plan.device)),
                   threads=torch.get_num_threads(), other_cpu=other_cpu,
                   ms_all=" ".join(f"{x:.4g}" for x in times[name]))
        row["signature"] = signature(transform=name, alpha=row["alpha"], tau=None,
                                     data=str(decoder.data.path), seed=plan.seed,
                                     checkpoint=path.name, step=decoder.step,
                                     split=plan.split, dropout=plan.dropout, rows=len(target),
                                     repeats=plan.repeats, device=plan.device,
                                     threads=torch.get_num_threads())
        rows.append(row)
    return rows


def run(plan: SupportPlan, out: Path, log=None) -> pd.DataFrame:
    """Measure and write the CSV (atomically)."""
    return write_rows(measure(plan, log), out)


def print_table(frame: pd.DataFrame, console: Console) -> None:
    first = frame.iloc[0]
    mode = "dropout on" if first["dropout"] else "eval mode"
    at = "" if pd.isna(first["step"]) else f" at step {int(first['step']):,}"
    table = Table(title=f"{first['trained']} model{at}, {first['rows']:,} {first['split']} rows "
                        f"({mode}): "
                        f"support mean {first['support_mean']:,.0f}, p90 "
                        f"{first['support_p90']:,.0f}, max {first['support_max']:,}")
    for col in ("loss", "k", "rows widened", "ms fwd+bwd", "x CE", "fastest"):
        table.add_column(col, justify="left" if col == "loss" else "right", no_wrap=True)
    for r in frame.to_dict("records"):
        entmax = r["loss"] != BASELINE
        table.add_row(r["loss"], f"{int(r['k']):,}" if entmax else "",
                      f"{r['widened']:.1%}" if entmax else "", f"{r['ms']:,.1f}",
                      f"{r['ratio_to_cross_entropy']:.2f}", "yes" if r["fastest"] is True else "")
    console.print(table)
