"""Training: the loop, gradient accumulation, checkpoints, resume, DDP, log and validation.

Implements the paper's training setup (Setup and Appendix "Optimization"): token-based
batches with gradient accumulation, Adam with Noam decay, optional gradient clipping and
weight averaging, no label smoothing, validation BLEU to keep the best checkpoint; alpha-ReLU's
tau fixed before training from the untrained model (:mod:`arelu_cli.nmt.output_stats`).

The loss of a step is the sum over all target tokens of the global batch (every micro-batch
of every process) divided by their number, so ``N`` processes with ``accum`` micro-batches
each train exactly like one process with ``N * accum``. Logits go straight from the model to
the transform's loss with ``reuse_logits=True`` (alpha-ReLU writes its gradient into the
logits' memory), so statistics of the logits are taken before ``backward``; under bf16
autocast they are copied to fp32 only for losses that do not read bf16 with fp32 math
(``OutputTransform.half_logits``), and per-token losses are summed in fp32. With
``[train] fused_output`` the model and alpha-ReLU's loss run fused
(:mod:`arelu_cli.nmt.fused_output`) and the statistics come from the decoder's output.

A run's folder holds ``config.json``, ``log.csv`` (:mod:`arelu_cli.nmt.train_log`), ``last.pt``
and ``best.pt`` (:mod:`arelu_cli.nmt.checkpoint`), and ``summary.json`` once it has finished
(``diverged.json`` instead if it stopped on a non-finite loss).
``last.pt`` stores the weights, optimizer, average, per-process RNG states, data position and
log accumulators, so a run killed at any moment resumes from it to the same final step with
the same losses.

Nothing passes for a good run that is not (:mod:`arelu_cli.nmt.train_guard`): impossible alpha
and tau are refused before a model exists, a step with a non-finite loss or gradient norm
is never applied and stops the run (``diverged.json``, exit 2, ``last.pt`` kept as it
was), and SIGINT/SIGTERM save ``last.pt`` after the current step and say how to resume.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rich.console import Console
from torch.nn.parallel import DistributedDataParallel

from arelu_cli.nmt import checkpoint, distributed, threads, train_log
from arelu_cli.nmt.attention import describe as describe_attention
from arelu_cli.config import Config
from arelu_cli.data.batching import Batch, batch_indices, collate, example_sizes
from arelu_cli.data.prepared import Prepared, data_fingerprint, load_prepared
from arelu_cli.errors import UserError
from arelu_cli.nmt.fused_output import FusedOutputLoss
from arelu_cli.nmt.model import Transformer
from arelu_cli.nmt.output_stats import batch_stats, hidden_stats, resolve_tau
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.results import atomic_write_text, signature, versions
from arelu_cli.nmt.schedule import average_weight, noam_lr, update_average
from arelu_cli.tau import check_relu_tau
from arelu_cli.nmt.train_guard import (DIVERGED, Diverged, Interrupted, StopSignals,
                                       check_new_run_folder, check_run_folder, clean_temporaries,
                                       diverged, grad_norm, is_finite, read_last, recorded_recipe,
                                       resume_hint)
from arelu_cli.nmt.evaluate import validate


SUMMARY = "summary.json"
"""Written when a run finishes (its :class:`Summary`): a run folder without it is unfinished."""


def snapshot_path(run: str | Path, step: int) -> Path:
    """Where ``[train] keep_every`` keeps the decoding weights of ``step``."""
    return Path(run) / "steps" / f"step-{step}.pt"


@dataclass
class State:
    """Where training stands; everything here goes into ``last.pt``."""

    step: int = 0
    epoch: int = 0
    position: int = 0
    """Batches of ``epoch`` this process has consumed."""
    epoch_batches: int = 1
    elapsed: float = 0.0
    """Wall-clock seconds of the run before this process started (validation included)."""
    best_bleu: float = -1.0
    best_step: int = 0
    valid_seconds: float = 0.0
    """Duration of the last validation: the time the budget keeps for a final one."""
    interval: dict = field(default_factory=lambda: {"loss": 0.0, "tgt": 0.0, "tokens": 0.0,
                                                    "seconds": 0.0})
    """Sums since the last log row (global over processes, loss local until logged)."""
    totals: dict = field(default_factory=lambda: {"tokens": 0.0, "seconds": 0.0})


@dataclass
class Session:
    """Everything a run holds; built by :func:`_setup`."""

    config: Config
    out: Path
    ctx: distributed.Context
    data: Prepared
    model: Transformer
    """The plain model (weights, checkpoints, validation without an average)."""
    forward: torch.nn.Module
    """What the training step calls: the model (or, with ``fused_output``, the model and its
    fused loss: :class:`FusedOutputLoss`), wrapped in DDP and/or compiled."""
    transform: OutputTransform
    optimizer: torch.optim.Optimizer
    average: Transformer | None
    signature: str
    started: float = field(default_factory=time.perf_counter)
    saved_step: int | None = None
    """The step ``last.pt`` holds (None before the first save)."""
    recipe: str | None = None
    """The recipe's name, in the signature and the checkpoints (kept when resuming)."""


@dataclass(frozen=True)
class Summary:
    out: Path
    steps: int
    seconds: float
    """Wall-clock seconds, validation included."""
    tokens_per_s: float
    """Source + target tokens per second of training time."""
    best_bleu: float
    best_step: int
    last_bleu: float | None
    tau: float | None
    rank: int
    """The process that trained (only rank 0 reports)."""


def train(config: Config, out: str | Path, *, resume: bool = False, recipe: str | None = None,
          console: Console | None = None) -> Summary:
    """Train from ``config`` into the folder ``out`` (or continue the run there if ``resume``)."""
    ctx = distributed.setup(config.train.device)
    try:
        session, state = _setup(config, Path(out), ctx, resume, recipe)
        try:
            with StopSignals(announce=ctx.is_main) as signals:
                outcome = _loop(session, state, console if ctx.is_main else None, signals)
        except (Diverged, Interrupted) as stopped:  # raised by every process alike
            outcome = stopped.with_traceback(None)  # its frames would keep DDP alive
        except KeyboardInterrupt:  # a second Ctrl-C: abort at once
            raise Interrupted(f"aborted by a second Ctrl-C after step {state.step}; "
                              f"{resume_hint(session.out, session.saved_step)}", 130,
                              ctx.rank) from None
        # DDP's reducer holds the process group: free it while every process is still here
        # (a gloo group destroyed after its peer left can hang in its destructor).
        del session, state
        gc.collect()
        distributed.barrier(ctx)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    finally:
        distributed.teardown(ctx)


def _setup(config: Config, out: Path, ctx: distributed.Context, resume: bool,
           recipe: str | None) -> tuple[Session, State]:
    data = load_prepared(config.data.path)
    t = config.train
    transform = get_transform(t.transform)
    ckpt = _load_for_resume(out, config, data, transform) if resume else None
    if transform.family == "relu" and not ckpt and not isinstance(t.tau, str):
        check_relu_tau(t.tau, transform.name, transform.alpha, data.tgt_vocab_size,
                       config.data.max_tokens)  # before building any model
    recipe = _claim_folder(out, ctx, ckpt, recipe)
    torch.manual_seed(t.seed)
    model = Transformer(config.model, data.src_vocab_size, data.tgt_vocab_size, data.pad_id)
    model.to(ctx.device)
    tau = ckpt["tau"] if ckpt else resolve_tau(t.tau, transform, model, data,
                                               config.data.max_tokens, t.seed)
    if tau is not None and not ckpt:  # auto and analytic too: a broken model gives NaN
        check_relu_tau(tau, transform.name, transform.alpha, data.tgt_vocab_size,
                       config.data.max_tokens)
    transform = get_transform(t.transform, tau=tau or 0.0)
    torch.manual_seed(t.seed + ctx.rank)  # dropout streams differ across processes
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(t.adam_beta1, t.adam_beta2),
                                 eps=t.adam_eps)
    average = copy.deepcopy(model).requires_grad_(False) if t.average_decay > 0 else None
    forward: torch.nn.Module = FusedOutputLoss(model, transform) if t.fused_output else model
    if ctx.distributed:
        forward = DistributedDataParallel(
            forward, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    if t.compile:
        forward = torch.compile(forward, dynamic=True)
    sig = signature(transform=transform.name, alpha=transform.alpha, tau=tau, data=data.corpus,
                    recipe=recipe, seed=t.seed, world_size=ctx.world_size,
                    fused_output=t.fused_output or None,
                    label_smoothing=t.label_smoothing or None,
                    attention=describe_attention(config.model))
    session = Session(config, out, ctx, data, model, forward, transform, optimizer, average, sig,
                      recipe=recipe)
    state = State()
    if ckpt:
        _restore(session, state, ckpt)
        session.saved_step = state.step
        if ctx.is_main:
            train_log.truncate_after(out / "log.csv", state.step)
            (out / DIVERGED).unlink(missing_ok=True)  # an earlier attempt's, now taken up again
    elif ctx.is_main:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (out / "log.csv", out / SUMMARY, out / DIVERGED):  # an earlier run's,
            stale.unlink(missing_ok=True)  # its checkpoints gone
        atomic_write_text(out / "config.json", json.dumps(
            {**config.to_dict(), "resolved": {"tau": tau, "world_size": ctx.world_size,
                                              "recipe": recipe,
                                              "data_fingerprint": data_fingerprint(data.meta)}},
            indent=2) + "\n")
    return session, state


def _claim_folder(out: Path, ctx: distributed.Context, ckpt: dict | None,
                  recipe: str | None) -> str | None:
    """Check the run folder (resumed when ``ckpt`` is its ``last.pt``, else new), clear what
    killed writes left in it, and return the recipe name of the run's signature: a resumed
    run keeps the one it started with unless another is given."""
    check_run_folder(out, ctx.is_main)
    if ckpt is None:
        check_new_run_folder(out)
    if ctx.is_main:
        clean_temporaries(out)
    return recorded_recipe(out, ckpt) if ckpt is not None and recipe is None else recipe


def _load_for_resume(out: Path, config: Config, data: Prepared,
                     transform: OutputTransform) -> dict:
    ckpt = read_last(out)
    tau = config.train.tau if not isinstance(config.train.tau, str) else None
    checkpoint.check_compatible(ckpt, out / checkpoint.LAST, data=data, transform=transform.name,
                                tau=tau)
    if ckpt["config"]["model"] != config.to_dict()["model"]:
        raise UserError(f"{out / checkpoint.LAST} has another [model] than the recipe; resume "
                        "with the recipe it was trained with")
    return ckpt


def _restore(s: Session, state: State, ckpt: dict) -> None:
    if ckpt["world_size"] != s.ctx.world_size:
        raise UserError(f"the checkpoint was written by {ckpt['world_size']} process(es); "
                        f"resume with the same number (--nproc_per_node={ckpt['world_size']})")
    s.model.load_state_dict(ckpt["model"])
    s.optimizer.load_state_dict(ckpt["optimizer"])
    if s.average is not None:
        s.average.load_state_dict(ckpt["average"])
    for key, value in ckpt["state"].items():
        setattr(state, key, value)
    rng = ckpt["rng"][s.ctx.rank]
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] is not None and s.ctx.device.type == "cuda":
        torch.cuda.set_rng_state(rng["cuda"], s.ctx.device)


def _payload(s: Session, state: State, kind: str) -> dict:
    weights = s.average if s.average is not None else s.model
    base = {"kind": kind, "config": s.config.to_dict(), "vocab": checkpoint.vocab_record(s.data),
            "transform": s.transform.name, "tau": s.transform.tau, "step": state.step,
            "world_size": s.ctx.world_size, "recipe": s.recipe, "versions": versions()}
    if kind == "best":
        return {**base, "model": weights.state_dict(), "average": None, "bleu": state.best_bleu}
    if kind == "snapshot":
        return {**base, "model": weights.state_dict(), "average": None}
    t = s.config.train
    schedule = {"kind": "noam", "lr": t.lr, "warmup": t.warmup, "d_model": s.config.model.d_model,
                "current_lr": noam_lr(max(state.step, 1), t.lr, s.config.model.d_model, t.warmup)}
    return {**base, "model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
            "schedule": schedule,
            "average": None if s.average is None else s.average.state_dict(),
            "state": dict(vars(state))}


def _save_last(s: Session, state: State) -> None:
    """Every process's RNG state is gathered; the main process writes ``last.pt``."""
    state.interval["loss"] = float(state.interval["loss"])
    rng = {"torch": torch.get_rng_state(),
           "cuda": torch.cuda.get_rng_state(s.ctx.device) if s.ctx.device.type == "cuda" else None}
    rngs = distributed.gather(s.ctx, rng)
    if s.ctx.is_main:
        state_now = copy.copy(state)
        state_now.elapsed = _clock(s, state)
        checkpoint.save({**_payload(s, state_now, "last"), "rng": rngs}, s.out / checkpoint.LAST)
    s.saved_step = state.step


def _clock(s: Session, state: State) -> float:
    """Wall-clock seconds of the whole run so far."""
    return state.elapsed + time.perf_counter() - s.started


def _micro_batches(s: Session, state: State) -> Iterator[Batch]:
    """This process's training batches from the current data position on, epoch after epoch."""
    encoded = s.data.split("train")
    sizes = example_sizes(encoded.src_lengths, encoded.tgt_lengths)
    while True:
        plan = batch_indices(sizes, s.config.data.max_tokens, seed=s.config.train.seed,
                             epoch=state.epoch, rank=s.ctx.rank, world_size=s.ctx.world_size)
        state.epoch_batches = len(plan)
        while state.position < len(plan):
            state.position += 1
            yield collate(encoded, plan[state.position - 1], pad_id=s.data.pad_id,
                          bos_id=s.data.bos_id, eos_id=s.data.eos_id)
        state.epoch, state.position = state.epoch + 1, 0


def _autocast(s: Session):
    precision = s.config.train.precision
    if precision == "bf16" or (precision == "auto" and s.ctx.device.type == "cuda"):
        return torch.autocast(s.ctx.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _micro_loss(s: Session, batch: Batch, with_stats: bool) -> tuple[torch.Tensor, dict | None]:
    """The loss of one micro-batch summed over its target tokens, in fp32, and (if
    ``with_stats``) the statistics of its logits, taken before alpha-ReLU's backward
    overwrites them. Non-finite logits give a non-finite loss without calling the
    transform's loss, and the step then stops the run (:func:`_step`)."""
    keep = batch.tgt_out != s.data.pad_id
    target, rows = batch.tgt_out[keep], s.config.train.stats_rows
    if s.config.train.fused_output:
        with _autocast(s):
            loss, hidden = s.forward(batch.src, batch.tgt_in, keep, target)  # (), (N, D)
        stats = hidden_stats(hidden, s.model.output, s.transform, rows) if with_stats else None
        return loss, stats
    with _autocast(s):
        logits = s.forward(batch.src, batch.tgt_in, keep)  # (N, V)
    logits = s.transform.loss_input(logits)  # e.g. softmax's cross-entropy would compute in bf16
    stats = batch_stats(logits, s.transform, rows) if with_stats else None
    # The sort-based entmax losses index out of range on NaN logits, so for them a NaN
    # anywhere is found first (one more pass over N x V); softmax's and alpha-ReLU's losses
    # simply come out non-finite, which the step catches without that pass.
    if s.transform.family == "entmax" and not is_finite(logits.detach().sum(dtype=torch.float32)):
        return logits.sum(dtype=torch.float32), stats  # backward runs on every process
    loss = s.transform.loss(logits, target, reduction="none", reuse_logits=True,
                            label_smoothing=s.config.train.label_smoothing)  # (N,)
    # Per-token losses come in the logits' dtype; a bf16 sum of a whole batch would keep
    # only 8 significant bits, so they are summed in fp32.
    return loss.sum(dtype=torch.float32), stats


def _step(s: Session, state: State, batches: list[Batch], with_stats: bool) -> dict | None:
    """One optimizer step over ``batches`` (this process's micro-batches)."""
    pad = s.data.pad_id
    tgt = sum(b.n_tgt_tokens for b in batches)
    tokens = tgt + sum(int((b.src != pad).sum()) for b in batches)
    tgt, tokens = distributed.all_sum(s.ctx, [float(tgt), float(tokens)])
    scale = s.ctx.world_size / tgt  # DDP averages gradients over processes
    stats, loss_sum = None, torch.zeros((), dtype=torch.float64, device=s.ctx.device)
    for i, batch in enumerate(batches):
        batch = batch.to(s.ctx.device)
        last = i == len(batches) - 1
        sync = (contextlib.nullcontext() if last or not s.ctx.distributed
                else getattr(s.forward, "_orig_mod", s.forward).no_sync())
        with sync:
            loss, first_stats = _micro_loss(s, batch, with_stats and i == 0)
            stats = stats or first_stats
            (loss * scale).backward()
        loss_sum += loss.detach()
    t = s.config.train
    norm = grad_norm(list(s.model.parameters()), t.clip_norm)
    # The gradient norm is global (DDP has summed the gradients); the loss is this process's.
    if distributed.any_true(s.ctx, not is_finite(loss_sum)) or not is_finite(norm):
        diverged(s.out, state.step + 1, {"loss": loss_sum, "grad_norm": norm}, s.saved_step,
                 s.ctx.is_main)
    lr = noam_lr(state.step + 1, t.lr, s.config.model.d_model, t.warmup)
    for group in s.optimizer.param_groups:
        group["lr"] = lr
    s.optimizer.step()
    s.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    if s.average is not None:
        update_average(list(s.average.parameters()), list(s.model.parameters()),
                       average_weight(state.step, t.average_decay))
    state.interval["loss"] = state.interval["loss"] + loss_sum
    state.interval["tgt"] += tgt
    state.interval["tokens"] += tokens
    state.totals["tokens"] += tokens
    return {**(stats or {}), "lr": lr}


def _check_weights(s: Session, state: State) -> None:
    """Before weights are validated or saved: an update with a finite gradient can still
    overflow them (a huge learning rate)."""
    norm = torch.nn.utils.get_total_norm(list(s.model.parameters()))
    if not is_finite(norm):
        diverged(s.out, state.step, {"weight_norm": norm}, s.saved_step, s.ctx.is_main)


def _train_row(s: Session, state: State, stats: dict) -> dict:
    """The training half of a log row (a collective: every process calls it); resets the
    interval sums."""
    iv = state.interval
    loss = distributed.all_sum(s.ctx, [float(iv["loss"])])[0]
    row = {"train_loss": loss / max(iv["tgt"], 1.0),
           "tokens_per_s": iv["tokens"] / max(iv["seconds"], 1e-9), **stats}
    state.interval = {"loss": 0.0, "tgt": 0.0, "tokens": 0.0, "seconds": 0.0}
    return row


def _validate(s: Session, state: State) -> dict:
    """Validation on the main process (the others wait); keeps ``best.pt``. Returns log fields."""
    fields: dict = {}
    if s.ctx.is_main:
        began = time.perf_counter()
        model = s.average if s.average is not None else s.model
        with _autocast(s):
            result = validate(model, s.data, s.transform, s.config, s.ctx.device)
        if is_finite(result.loss) and result.bleu > state.best_bleu:
            state.best_bleu, state.best_step = result.bleu, state.step
            checkpoint.save(_payload(s, state, "best"), s.out / checkpoint.BEST)
        state.valid_seconds = time.perf_counter() - began
        fields = {"val_loss": result.loss, "val_bleu": result.bleu}
    distributed.barrier(s.ctx)
    # Finite weights can still give non-finite logits; every process stops alike.
    if distributed.any_true(s.ctx, not is_finite(fields.get("val_loss", 0.0))):
        diverged(s.out, state.step, {"val_loss": fields.get("val_loss", math.nan)},
                 s.saved_step, s.ctx.is_main)
    return fields


def _out_of_budget(s: Session, state: State) -> bool:
    t = s.config.train
    if state.step >= t.max_steps:
        return True
    if t.max_minutes <= 0:
        return False
    # Stop while there is still time for one more step and the final validation.
    reserve = state.valid_seconds + state.totals["seconds"] / max(state.step, 1)
    return distributed.any_true(s.ctx, _clock(s, state) + reserve >= 60.0 * t.max_minutes)


def _write_row(s: Session, state: State, row: dict) -> None:
    if row and s.ctx.is_main:
        epoch = state.epoch + state.position / max(state.epoch_batches, 1)
        train_log.append_row(s.out / "log.csv", {
            "step": state.step, "epoch": round(epoch, 4), "wall_s": round(_clock(s, state), 3),
            **row, "signature": s.signature})


def _show(bar, task, s: Session, state: State, row: dict) -> None:
    if bar is None:
        return
    t = s.config.train
    eta = (t.max_steps - state.step) * state.totals["seconds"] / max(state.step, 1)
    if t.max_minutes > 0:
        eta = min(eta, 60.0 * t.max_minutes - _clock(s, state))
    fields = {"eta": train_log.format_eta(eta)}
    if "tokens_per_s" in row:
        fields.update(speed=f"{row['tokens_per_s']:,.0f}", loss=f"{row['train_loss']:.3f}")
    if "val_bleu" in row:
        fields["bleu"] = f"{row['val_bleu']:.2f}"
        bar.console.print(f"step {state.step}: validation loss {row['val_loss']:.4f}, BLEU "
                          f"{row['val_bleu']:.2f} (best {state.best_bleu:.2f} at step "
                          f"{state.best_step}), {_clock(s, state) / 60:.1f} min")
    bar.update(task, completed=state.step, **fields)


def _loop(s: Session, state: State, console: Console | None, signals: StopSignals) -> Summary:
    """Steps until the budget ends; on a stop signal, ``last.pt`` after the current step and
    :class:`Interrupted`."""
    t = s.config.train
    batches = _micro_batches(s, state)
    bar = train_log.progress_bar(console)
    last_bleu, done, stop = None, state.step >= t.max_steps, False
    with bar or contextlib.nullcontext(), threads.governed(t.threads, s.ctx) as governor:
        task = bar.add_task("train", total=t.max_steps, completed=state.step, speed="-",
                            loss="-", bleu="-", eta="-") if bar else None
        while not done:
            began, tokens = time.perf_counter(), state.totals["tokens"]
            used = torch.get_num_threads()
            logging = (state.step + 1) % t.log_every == 0
            stats = _step(s, state, [next(batches) for _ in range(t.accum)],
                          logging and s.ctx.is_main)
            spent = time.perf_counter() - began
            state.interval["seconds"] += spent
            state.totals["seconds"] += spent
            if governor is not None:
                governor.after_step(state.totals["tokens"] - tokens, spent)
            finished = _out_of_budget(s, state)
            stop = signals.requested(s.ctx) and not finished  # a finished run ends as usual
            done = stop or finished
            row = {**_train_row(s, state, stats), "threads": used} if logging else {}
            validating = not stop and (state.step % t.valid_every == 0 or done)
            keeping = t.keep_every and state.step % t.keep_every == 0
            if validating or keeping or state.step % t.save_every == 0 or done:
                _check_weights(s, state)
            if validating:
                row.update(_validate(s, state))
                last_bleu = row.get("val_bleu", last_bleu)
            _write_row(s, state, row)
            if keeping and s.ctx.is_main:
                checkpoint.save(_payload(s, state, "snapshot"), snapshot_path(s.out, state.step))
            if state.step % t.save_every == 0 or done:
                _save_last(s, state)
            _show(bar, task, s, state, row)
    if stop:
        raise signals.interrupted(state.step, s.out, s.saved_step, s.ctx.rank)
    summary = Summary(s.out, state.step, _clock(s, state),
                      state.totals["tokens"] / max(state.totals["seconds"], 1e-9),
                      state.best_bleu, state.best_step, last_bleu, s.transform.tau, s.ctx.rank)
    if s.ctx.is_main:
        atomic_write_text(s.out / SUMMARY, json.dumps(
            {**dataclasses.asdict(summary), "out": str(s.out), "signature": s.signature},
            indent=2) + "\n")
    return summary
