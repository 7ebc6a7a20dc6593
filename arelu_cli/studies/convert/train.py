"""One training run of the conversion study, through the ``transformers`` integration only:
a ``LlamaForCausalLM`` (from scratch or ``from_pretrained``), the output transform by
:func:`arelu_cli.hf.use_transform` (the control keeps transformers' own cross-entropy, as the
pretrained model had), LoRA by ``peft``, ``model(input_ids=x, labels=x).loss`` and AdamW with a
``transformers`` schedule, on blocks of the prepared corpus (:mod:`arelu_cli.data.blocks`).

A run is a folder: ``config.json`` (its :class:`RunSpec`), ``log.csv``, ``state.pt`` (weights,
optimizer, schedule, data position and RNG: what resuming needs, written atomically every
``save_every`` steps), ``snapshots/step-N/`` (``save_pretrained`` folders at the evaluated
steps, LoRA merged into the weights) and ``summary.json``, written last: the run is done when
it exists.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from arelu_cli.data.blocks import block_batches
from arelu_cli.data.prepared import Prepared
from arelu_cli.studies.convert.recipe import ModelSection
from arelu_cli.train import run_dir
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import machine

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
STATE = "state.pt"


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides what a run trains (its ``config.json``)."""

    transform: str
    """Registry name (``softmax``: transformers' own loss, no ``use_transform``)."""
    tau: float | None
    """alpha-ReLU's tau; None: the analytic tau :func:`arelu_cli.hf.use_transform` picks."""
    init: str | None
    """The pretrained ``save_pretrained`` folder; None: a fresh model."""
    seed: int
    steps: int
    lr: float
    warmup: int
    schedule: str
    """A ``transformers.get_scheduler`` name: ``cosine_with_min_lr`` or ``linear``."""
    min_lr_rate: float
    weight_decay: float
    snapshots: tuple[int, ...]
    save_every: int
    log_every: int
    block_size: int
    max_tokens: int
    lora: dict | None = None
    """``peft.LoraConfig`` keys (rank ``r``, ``lora_alpha``, ``lora_dropout``) or None."""


def llama_config(section: ModelSection, vocab: int, block_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab, hidden_size=section.hidden_size,
                       intermediate_size=section.intermediate_size,
                       num_hidden_layers=section.layers, num_attention_heads=section.heads,
                       num_key_value_heads=section.heads, max_position_embeddings=block_size,
                       attention_dropout=section.attention_dropout,
                       tie_word_embeddings=section.tie_embeddings, pad_token_id=0,
                       bos_token_id=1, eos_token_id=2)


def build(spec: RunSpec, model_section: ModelSection | None, vocab: int):
    """The model as the run trains it (transform applied, LoRA wrapped) and the transform."""
    from transformers import LlamaForCausalLM

    from arelu_cli.hf import use_transform

    torch.manual_seed(spec.seed)
    if spec.init is None:
        model = LlamaForCausalLM(llama_config(model_section, vocab, spec.block_size))
    else:
        model = LlamaForCausalLM.from_pretrained(spec.init)
    if spec.lora is not None:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(target_modules=list(LORA_TARGETS),
                                                 **spec.lora))
    transform = None
    if spec.transform != "softmax":
        transform = use_transform(model, spec.transform, tau=spec.tau)
    return model, transform


def optimizer(model, spec: RunSpec):
    from transformers import get_scheduler

    trained = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trained if p.dim() > 1], "weight_decay": spec.weight_decay},
              {"params": [p for p in trained if p.dim() <= 1], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=spec.lr, betas=(0.9, 0.95))
    extra = {"min_lr_rate": spec.min_lr_rate} if spec.schedule == "cosine_with_min_lr" else None
    schedule = get_scheduler(spec.schedule, opt, num_warmup_steps=spec.warmup,
                             num_training_steps=spec.steps, scheduler_specific_kwargs=extra)
    return opt, schedule


def save_snapshot(model, folder: Path) -> None:
    """``save_pretrained`` of the weights as they are (a PEFT model merged, on a copy)."""
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).merge_and_unload()
    tmp = folder.with_name(folder.name + ".tmp")
    for stale in (tmp, folder):       # a run killed after its snapshot redoes the steps
        shutil.rmtree(stale, ignore_errors=True)
    model.save_pretrained(tmp)
    os.replace(tmp, folder)


def _save_state(path: Path, state: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def check_spec(folder: Path, spec: RunSpec) -> None:
    """Write the run's config (:data:`arelu_cli.train.run_dir.CONFIG`), or refuse a folder
    made with another spec."""
    wanted = json.loads(json.dumps(asdict(spec)))
    if run_dir.config_path(folder).is_file():
        found = run_dir.require_config(folder)
        if found != wanted:
            diff = sorted(k for k in wanted if found.get(k) != wanted[k])
            raise UserError(f"{folder} was trained with other settings ({', '.join(diff)}); "
                            "delete it to train it again, or restore the recipe")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        run_dir.write_config(folder, wanted)


def _batches(data: Prepared, spec: RunSpec, epoch: int):
    return block_batches(data, "train", spec.max_tokens, spec.block_size, seed=spec.seed,
                         epoch=epoch)


def train_run(folder: Path, spec: RunSpec, data: Prepared, model_section: ModelSection | None,
              until: int | None = None, say: Callable[[str], None] = print) -> int:
    """Train (or resume) the run in ``folder`` to step ``until`` (default its last); returns the
    step reached. ``summary.json`` is written when the last step is."""
    check_spec(folder, spec)
    until = spec.steps if until is None else until
    model, _ = build(spec, model_section, data.vocab_size)
    opt, schedule = optimizer(model, spec)
    step, epoch, done_in_epoch, seconds = 0, 0, 0, 0.0
    if (folder / STATE).is_file():
        state = torch.load(folder / STATE, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, epoch, done_in_epoch = state["step"], state["epoch"], state["done_in_epoch"]
        seconds = state["seconds"]
        torch.set_rng_state(state["rng"])
        say(f"{folder}: resumed at step {step}")
    model.train()
    log = run_dir.log_path(folder)
    if not log.is_file():
        atomic_write_text(log, "step,epoch,loss,lr,seconds,tokens_per_s\n")
    batches = _batches(data, spec, epoch)
    for _ in range(done_in_epoch):
        next(batches)
    losses, tokens, started = [], 0, time.perf_counter()
    while step < until:
        batch = next(batches, None)
        if batch is None:
            epoch, done_in_epoch, batches = epoch + 1, 0, _batches(data, spec, epoch + 1)
            continue
        ids = batch.tgt_in
        labels = ids.masked_fill(ids == data.pad_id, -100)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)
        step, done_in_epoch = step + 1, done_in_epoch + 1
        losses.append(loss.item())
        tokens += int((labels != -100).sum())
        if step % spec.log_every == 0 or step == until:
            spent = time.perf_counter() - started
            seconds += spent
            with log.open("a", newline="") as f:
                csv.writer(f).writerow([step, epoch, f"{sum(losses) / len(losses):.5f}",
                                        f"{schedule.get_last_lr()[0]:.3e}", f"{spent:.2f}",
                                        f"{tokens / spent:.1f}"])
            say(f"{folder.parent.name}/{folder.name} step {step}/{spec.steps} loss "
                f"{sum(losses) / len(losses):.4f} {spent / len(losses):.2f} s/step")
            losses, tokens, started = [], 0, time.perf_counter()
        if step in spec.snapshots:
            save_snapshot(model, folder / "snapshots" / f"step-{step}")
        if step % spec.save_every == 0 or step == until or step in spec.snapshots:
            _save_state(folder / STATE, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                         "schedule": schedule.state_dict(), "step": step,
                                         "epoch": epoch, "done_in_epoch": done_in_epoch,
                                         "seconds": seconds, "rng": torch.get_rng_state()})
    if step == spec.steps and not run_dir.finished(folder):
        run_dir.write_summary(folder, {"steps": step, "epochs": epoch,
                                       "train_seconds": round(seconds, 1),
                                       "machine": machine(torch.device("cpu")),
                                       "threads": torch.get_num_threads()})
    return step


def snapshot(folder: Path, step: int) -> Path:
    return folder / "snapshots" / f"step-{step}"


def done(folder: Path) -> bool:
    return run_dir.finished(folder)
