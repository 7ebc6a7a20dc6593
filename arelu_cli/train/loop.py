"""Training: the run as a whole -- setup, the loop, validation, log rows and the summary.

Implements the paper's training setup (Setup and Appendix "Optimization"): token-based
batches with gradient accumulation, Adam with Noam decay, optional gradient clipping and
weight averaging, no label smoothing by default (``[train] label_smoothing`` adds it, for every
loss), validation BLEU to keep the best checkpoint; alpha-ReLU's
tau fixed before training from the untrained model (:mod:`arelu_cli.model.output_stats`). One
optimizer step is :mod:`arelu_cli.train.step`; what a run holds, its checkpoints and
resuming are :mod:`arelu_cli.train.state`.

A run's folder holds ``config.json``, ``log.csv`` (:mod:`arelu_cli.train.log`) and its
TensorBoard events (``tensorboard/``, :mod:`arelu_cli.train.events`), ``last.pt`` and
``best.pt`` (:mod:`arelu_cli.model.checkpoint`), and ``summary.json`` once it has finished
(``diverged.json`` instead if it stopped on a non-finite loss): its ``best_metric`` says
which best it holds, ``best_bleu`` (translation) or ``best_dev_loss`` (a language model),
:func:`arelu_cli.train.run_dir.best_score` either as one higher-is-better score. A run
killed at any moment resumes from ``last.pt`` to the same final step with the same losses,
on the data it was trained on (``config.json`` records its fingerprint;
``--allow-data-change`` continues on another version and records that).

Nothing passes for a good run that is not: impossible alpha and tau are refused before a
model exists, a step with a non-finite loss or gradient norm is never applied and stops
the run (:mod:`arelu_cli.train.divergence`: ``diverged.json``, exit 2, ``last.pt`` kept as it
was), and SIGINT/SIGTERM save ``last.pt`` after the current step and say how to resume
(:mod:`arelu_cli.train.stop_signals`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from torch.nn.parallel import DistributedDataParallel

from arelu_cli.model import checkpoint

from arelu_cli.train import distributed

from arelu_cli.train import threads

from arelu_cli.train import log as train_log
from arelu_cli.model.attention import describe as describe_attention
from arelu_cli.config import Config
from arelu_cli.data.prepared import Prepared, data_fingerprint, load_prepared
from arelu_cli.model.fused_output import FusedOutputLoss
from arelu_cli.model.lm import build_model, check_task
from arelu_cli.model.transformer import TokenModel
from arelu_cli.model.output_stats import resolve_tau
from arelu_cli.train.precision import resolve as resolve_precision
from arelu_cli.train.run_record import differences, record_setting_changes
from arelu_cli.util.errors import UserError
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.util.signatures import machine, signature
from arelu_cli.transforms.tau import check_relu_tau
from arelu_cli.train.data_version import DataChange, record_data_change
from arelu_cli.train.divergence import Diverged, diverged, is_finite
from arelu_cli.train.events import EventLog, remove_events
from arelu_cli.train import run_dir
from arelu_cli.train.run_dir import check_new_run_folder, check_run_folder, clean_temporaries
from arelu_cli.train.stop_signals import Interrupted, StopSignals, interrupted
from arelu_cli.train.state import Session, load_for_resume
from arelu_cli.train.schedule import adam
from arelu_cli.train.step import (autocast, check_weights, micro_batches, optimizer_step,
                                      train_row)
from arelu_cli.train.evaluate import validate


def snapshot_path(run: str | Path, step: int) -> Path:
    """Where ``[train] keep_every`` keeps the decoding weights of ``step``."""
    return Path(run) / "steps" / f"step-{step}.pt"


@dataclass(frozen=True)
class Summary:
    out: Path
    steps: int
    seconds: float
    """Wall-clock seconds, validation included."""
    tokens_per_s: float
    """Source + target tokens per second of training time."""
    best_bleu: float | None
    """A translation run's best validation BLEU (None for a language model)."""
    best_dev_loss: float | None
    """A language model's best validation loss, per token (None for a translation run)."""
    best_step: int
    last_bleu: float | None
    tau: float | None
    rank: int
    """The process that trained (only rank 0 reports)."""


def train(config: Config, out: str | Path, *, resume: bool = False, recipe: str | None = None,
          console: Console | None = None, allow_data_change: bool = False,
          beside: int = 0) -> Summary:
    """Train from ``config`` into the folder ``out`` (or continue the run there if ``resume``:
    on the data it was trained on, or with ``allow_data_change`` on the folder as it is now);
    ``beside``: other runs training at the same time (recorded in ``summary.json``)."""
    ctx = distributed.setup(config.train.device)
    created = not Path(out).exists()
    try:
        session = setup_run(config, Path(out), ctx, resume, recipe, allow_data_change)
        session.beside = beside
        try:
            with StopSignals(announce=ctx.is_main) as signals:
                outcome = _loop(session, console if ctx.is_main else None, signals)
        except (Diverged, Interrupted) as stopped:  # raised by every process alike
            outcome = stopped.with_traceback(None)  # its frames would keep DDP alive
        except KeyboardInterrupt:  # a second Ctrl-C: abort at once
            raise interrupted(f"aborted by a second Ctrl-C after step {session.state.step}", 130,
                              session.out, session.saved_step, ctx.rank) from None
        finally:
            if session.events is not None:
                session.events.close()
        # DDP's reducer holds the process group: free it while every process is still here
        # (a gloo group destroyed after its peer left can hang in its destructor). One process
        # has no group, and a full collection costs it ~0.2 s with torch imported.
        del session
        if ctx.distributed:
            gc.collect()
        distributed.barrier(ctx)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    except UserError:
        if created and ctx.is_main:
            _remove_unstarted(Path(out))
        raise
    finally:
        distributed.teardown(ctx)


def _remove_unstarted(out: Path) -> None:
    """Remove the folder this call made for a run refused before its first step (a bad
    ``[model]``, data it cannot batch): nothing half-written is left behind."""
    if out.is_dir() and run_dir.only_record(out):
        for path in out.iterdir():
            path.unlink()
        out.rmdir()


def setup_run(config: Config, out: Path, ctx: distributed.Context, resume: bool,
              recipe: str | None, allow_data_change: bool = False) -> Session:
    """The :class:`Session` of the run in ``out`` before its first step: data, model,
    optimizer and tau, resumed from ``last.pt`` (``resume``) or a new run's folder claimed."""
    data = load_prepared(config.data.path)
    check_task(config, data)
    t = config.train
    transform = get_transform(t.transform)
    ckpt, change = (load_for_resume(out, config, data, transform, allow_data_change)
                    if resume else (None, None))
    if transform.family == "relu" and not ckpt and not isinstance(t.tau, str):
        check_relu_tau(t.tau, transform.name, transform.alpha, data.tgt_vocab_size,
                       config.data.max_tokens)  # before building any model
    recipe = _claim_folder(out, ctx, ckpt, recipe)
    torch.manual_seed(t.seed)
    model = build_model(config, data.src_vocab_size, data.tgt_vocab_size, data.pad_id)
    model.to(ctx.device)
    tau = ckpt["tau"] if ckpt else resolve_tau(t.tau, transform, model, data,
                                               config.data.max_tokens, t.seed,
                                               config.data.block_size)
    if tau is not None and not ckpt:  # auto and analytic too: a broken model gives NaN
        check_relu_tau(tau, transform.name, transform.alpha, data.tgt_vocab_size,
                       config.data.max_tokens)
    transform = get_transform(t.transform, tau=tau or 0.0)
    torch.manual_seed(t.seed + ctx.rank)  # dropout streams differ across processes
    session = _session(config, out, ctx, data, model, transform, tau, recipe)
    if ckpt:
        _resumed(session, ckpt, change)
    elif ctx.is_main:
        _started(session, tau)
    if t.tensorboard and ctx.is_main:
        session.events = EventLog(out, data.tgt_vocab_size,
                                  purge_from=session.state.step + 1 if ckpt else None)
    return session


def _session(config: Config, out: Path, ctx: distributed.Context, data: Prepared,
             model: TokenModel, transform: OutputTransform, tau: float | None,
             recipe: str | None) -> Session:
    """The optimizer, the average and what the step calls around ``model``."""
    t = config.train
    optimizer = adam(model.parameters(), t)
    average = copy.deepcopy(model).requires_grad_(False) if t.average_decay > 0 else None
    forward: torch.nn.Module = (FusedOutputLoss(model, transform, t.label_smoothing)
                                if t.fused_output else model)
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
    return Session(config, out, ctx, data, model, forward, transform, optimizer, average, sig,
                   recipe=recipe)


def _resumed(s: Session, ckpt: dict, change: DataChange | None) -> None:
    """Continue from ``last.pt``: its state back, the log cut to its step, and (main
    process) a change of data or of settings recorded in ``config.json``."""
    state = s.state
    s.restore(ckpt)
    s.saved_step = state.step
    if s.ctx.is_main:
        train_log.truncate_after(run_dir.log_path(s.out), state.step)
        run_dir.diverged_path(s.out).unlink(missing_ok=True)  # an earlier attempt's, now taken up again
        changes = _setting_changes(s.out, ckpt, s.config)
        if changes:  # a longer budget is the ordinary way to go on: recorded, not announced
            note = record_setting_changes(s.out, s.config, state.step, changes)
            if set(changes) != {"train.max_steps"}:
                print(note, file=sys.stderr)
        if change is not None:
            print(record_data_change(s.out, change), file=sys.stderr)


def _setting_changes(out: Path, ckpt: dict, config: Config) -> dict:
    """What the resumed run changes of its settings: against its ``config.json`` (the
    settings in force, the precision they resolved to), else (none readable) ``last.pt``'s."""
    try:
        return differences(run_dir.read_config(out) or ckpt["config"], config)
    except UserError:
        return differences(ckpt["config"], config)


def _started(s: Session, tau: float | None) -> None:
    """A new run's folder: an earlier run's files gone, its ``config.json`` written."""
    s.out.mkdir(parents=True, exist_ok=True)
    run_dir.clear_outcome(s.out)  # an earlier run's, its checkpoints gone
    remove_events(s.out)
    run_dir.write_config(s.out, {
        **s.config.to_dict(), "resolved": {"tau": tau, "world_size": s.ctx.world_size,
                                           "recipe": s.recipe, "precision": resolve_precision(
                                               s.config.train.precision, s.ctx.device),
                                           "data_fingerprint": data_fingerprint(s.data.meta)}})


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
    return ckpt.get("recipe") if ckpt is not None and recipe is None else recipe


def _validate(s: Session) -> dict:
    """Validation on the main process (the others wait); keeps ``best.pt``. Returns log fields."""
    state = s.state
    fields: dict = {}
    if s.ctx.is_main:
        began = time.perf_counter()
        model = s.average if s.average is not None else s.model
        with autocast(s):
            result = validate(model, s.data, s.transform, s.config, s.ctx.device)
        if is_finite(result.loss) and (result.score > state.best_bleu or not state.best_step):
            state.best_bleu, state.best_step = result.score, state.step
            checkpoint.save(s.payload("best"), s.out / checkpoint.BEST)
        state.valid_seconds = time.perf_counter() - began
        fields = {"val_loss": result.loss, "val_bleu": result.bleu, "val_ppl": result.ppl}
    distributed.barrier(s.ctx)
    # Finite weights can still give non-finite logits; every process stops alike.
    if distributed.any_true(s.ctx, not is_finite(fields.get("val_loss", 0.0))):
        diverged(s.out, state.step, {"val_loss": fields.get("val_loss", math.nan)},
                 s.saved_step, s.ctx.is_main)
    return fields


def _out_of_budget(s: Session) -> bool:
    state = s.state
    t = s.config.train
    if state.step >= t.max_steps:
        return True
    if t.max_minutes <= 0:
        return False
    # Stop while there is still time for one more step and the final validation.
    reserve = state.valid_seconds + state.totals["seconds"] / max(state.step, 1)
    return distributed.any_true(s.ctx, s.clock() + reserve >= 60.0 * t.max_minutes)


def _write_row(s: Session, row: dict) -> None:
    state = s.state
    if row and s.ctx.is_main:
        epoch = state.epoch + state.position / max(state.epoch_batches, 1)
        train_log.append_row(run_dir.log_path(s.out), {
            "step": state.step, "epoch": round(epoch, 4), "wall_s": round(s.clock(), 3),
            **row, "signature": s.signature})
        if s.events is not None:
            s.events.add(state.step, row)


def _show(bar, task, s: Session, row: dict) -> None:
    state = s.state
    if bar is None:
        return
    t = s.config.train
    eta = (t.max_steps - state.step) * state.totals["seconds"] / max(state.step, 1)
    if t.max_minutes > 0:
        eta = min(eta, 60.0 * t.max_minutes - s.clock())
    fields = {"eta": train_log.format_eta(eta)}
    if "tokens_per_s" in row:
        fields.update(speed=f"{row['tokens_per_s']:,.0f}", loss=f"{row['train_loss']:.3f}")
    if row.get("val_bleu") is None and "val_loss" in row:  # a language model
        ppl = "" if row["val_ppl"] is None else f", perplexity {row['val_ppl']:.2f}"
        bar.console.print(f"step {state.step}: validation loss {row['val_loss']:.4f}{ppl} (best "
                          f"{-state.best_bleu:.4f} at step {state.best_step}), "
                          f"{s.clock() / 60:.1f} min")
    elif "val_bleu" in row:
        fields["bleu"] = f"{row['val_bleu']:.2f}"
        bar.console.print(f"step {state.step}: validation loss {row['val_loss']:.4f}, BLEU "
                          f"{row['val_bleu']:.2f} (best {state.best_bleu:.2f} at step "
                          f"{state.best_step}), {s.clock() / 60:.1f} min")
    bar.update(task, completed=state.step, **fields)


def _loop(s: Session, console: Console | None, signals: StopSignals) -> Summary:
    """Steps until the budget ends; on a stop signal, ``last.pt`` after the current step and
    :class:`Interrupted`."""
    state = s.state
    t = s.config.train
    batches = micro_batches(s)
    bar = train_log.progress_bar(console)
    last_bleu, done, stop = None, state.step >= t.max_steps, False
    with bar or contextlib.nullcontext(), threads.governed(t.threads, s.ctx) as governor:
        task = bar.add_task("train", total=t.max_steps, completed=state.step, speed="-",
                            loss="-", bleu="-", eta="-") if bar else None
        while not done:
            began, tokens = time.perf_counter(), state.totals["tokens"]
            used = torch.get_num_threads()
            logging = (state.step + 1) % t.log_every == 0
            stats = optimizer_step(s, [next(batches) for _ in range(t.accum)],
                                   logging and s.ctx.is_main)
            spent = time.perf_counter() - began
            state.interval["seconds"] += spent
            state.totals["seconds"] += spent
            if governor is not None:
                governor.after_step(state.totals["tokens"] - tokens, spent)
            finished = _out_of_budget(s)
            stop = signals.requested(s.ctx) and not finished  # a finished run ends as usual
            done = stop or finished
            row = {**train_row(s, stats), "threads": used} if logging else {}
            validating = not stop and (state.step % t.valid_every == 0 or done)
            keeping = t.keep_every and state.step % t.keep_every == 0
            if validating or keeping or state.step % t.save_every == 0 or done:
                check_weights(s)
            if validating:
                row.update(_validate(s))
                last_bleu = row.get("val_bleu", last_bleu)
            _write_row(s, row)
            if keeping and s.ctx.is_main:
                checkpoint.save(s.payload("snapshot"), snapshot_path(s.out, state.step))
            if state.step % t.save_every == 0 or done:
                s.save_last()
            _show(bar, task, s, row)
    if stop:
        raise signals.interrupted(state.step, s.out, s.saved_step, s.ctx.rank)
    lm = s.config.data.task == "lm"  # its score is minus the dev loss (higher is better)
    summary = Summary(s.out, state.step, s.clock(),
                      state.totals["tokens"] / max(state.totals["seconds"], 1e-9),
                      None if lm else state.best_bleu, -state.best_bleu if lm else None,
                      state.best_step, last_bleu, s.transform.tau, s.ctx.rank)
    if s.ctx.is_main:
        run_dir.write_summary(s.out, {**dataclasses.asdict(summary),
                                      "best_metric": "dev_loss" if lm else "bleu",
                                      "beside": s.beside,
                                      "out": str(s.out), "signature": s.signature,
                                      "machine": machine(s.ctx.device)})
    return summary
