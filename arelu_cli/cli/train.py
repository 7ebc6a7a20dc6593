"""``arelu train`` and ``arelu estimate-tau``: a model, and alpha-ReLU's threshold tau."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from arelu_cli.cli.app import app, console
from arelu_cli.util.errors import UserError


@app.command("estimate-tau")
def estimate_tau(
    method: str = typer.Option(
        "analytic", help="analytic (no data), monte-carlo (exact tau of random Gaussian logits), "
        "all (both of those side by side), empirical (the first training batches through the "
        "untrained model of --recipe, on --data: the paper's method) or both (empirical beside "
        "analytic)."),
    d_model: Optional[int] = typer.Option(
        512, help="Hidden size: sets sigma^2 = 2 d_model / (d_model + d_vocab) (paper appendix)."),
    d_vocab: str = typer.Option("10000,40000,60000", help="Vocabulary size(s), comma-separated."),
    alpha: str = typer.Option("1.5", help="entmax alpha(s) in [1.05, 2], comma-separated."),
    sigma: Optional[float] = typer.Option(None, help="Logit std; overrides --d-model."),
    rule: str = typer.Option(
        "paper", help="Analytic rule(s): paper (the appendix Lemma, reproduces Table 3) or tail "
        "(Gaussian-tail expectation, closer to Monte Carlo); comma-separated."),
    samples: int = typer.Option(1000, help="Monte Carlo: random logit vectors per (d_vocab, alpha)."),
    seed: int = typer.Option(0, help="Monte Carlo seed."),
    out: Path = typer.Option(Path("results/tau/table3_tau.csv"), help="CSV file to write."),
    recipe: Optional[Path] = typer.Option(
        None, help="Empirical: the recipe whose model (and [data] path) to use."),
    data: Optional[str] = typer.Option(None, help="Empirical: prepared corpus folder (overrides the recipe's)."),
    batches: int = typer.Option(1, help="Empirical: first training batches to average over (paper: 1)."),
) -> None:
    """The threshold tau of alpha-entmax that alpha-ReLU uses (paper Table 3); write CSV.

    Empirical and both ignore --d-model/--d-vocab/--sigma: they come from the recipe's model
    and the corpus's target vocabulary.
    """
    from arelu_cli.analysis import tau_table
    from arelu_cli.util.options import parse_list
    from arelu_cli.config import load_config
    from arelu_cli.config import resolve_recipe
    from arelu_cli.util.results import write_rows

    if method in ("empirical", "both"):
        if recipe is None and data is None:
            raise UserError(f"--method {method} needs a model and data: give --recipe "
                            "(recipes/*.toml) and/or --data (a prepared folder)")
        config = load_config(recipe and resolve_recipe(recipe), {("data", "path"): data})
        rows = tau_table.empirical_rows(
            method, config, parse_list(alpha, float, "--alpha"),
            parse_list(rule, str, "--rule"), batches=batches)
        tau_table.print_table(write_rows(rows, out), console)
        console.print(f"wrote {out}")
        return
    rows = tau_table.tau_rows(
        method, parse_list(d_vocab, int, "--d-vocab"),
        parse_list(alpha, float, "--alpha"), parse_list(rule, str, "--rule"),
        d_model=d_model, sigma=sigma, n_samples=samples, seed=seed)
    tau_table.print_table(write_rows(rows, out), console)
    console.print(f"wrote {out}")


def _tau_option(text: Optional[str]) -> str | float | None:
    """--tau: auto, analytic or a number."""
    if text is None or text in ("auto", "analytic"):
        return text
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--tau takes auto, analytic or a number, got {text!r}") from None


def _build_engine(device: str, transform: str) -> None:
    """Compile the ``cpp`` engine now (announced, once per machine) if the run is
    alpha-ReLU on CPU on that engine, rather than inside its first training step."""
    import torch

    from arelu_cli.registry import get_transform
    from arelu_cli.transforms import build_cpp, get_engine

    on_cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if on_cpu and get_engine() in ("auto", "cpp") and get_transform(transform).family == "relu":
        build_cpp()


@app.command()
def train(
    recipe: Optional[Path] = typer.Option(
        None, help="TOML recipe (recipes/*.toml); without it, the paper's IWSLT'14 defaults."),
    transform: Optional[str] = typer.Option(
        None, help="Output transform: softmax, sparsemax, 1.5-entmax, 1.5-entmax-k100, 1.5-relu, "
        "any a-relu / a-entmax."),
    tau: Optional[str] = typer.Option(
        None, help="alpha-ReLU threshold: auto (first batch through the untrained model, the "
        "paper's method), analytic (the paper's Lemma) or a number."),
    out: Optional[Path] = typer.Option(None, help="Run folder (default runs/RECIPE/TRANSFORM)."),
    resume: Optional[Path] = typer.Option(
        None, help="Continue the run in this folder from its last.pt (flags override its config)."),
    allow_data_change: bool = typer.Option(
        False, "--allow-data-change", help="With --resume: continue even though the prepared "
        "folder is not the version the run was trained on (recorded in its config.json)."),
    data: Optional[str] = typer.Option(None, help="Prepared corpus folder (overrides the recipe's data path)."),
    max_steps: Optional[int] = typer.Option(None, help="Optimizer steps to train for."),
    max_minutes: Optional[float] = typer.Option(
        None, help="Wall-clock budget in minutes, validation included (0: none)."),
    seed: Optional[int] = typer.Option(None, help="Seed of the initialization, data order and dropout."),
    device: Optional[str] = typer.Option(None, help="auto, cpu or cuda."),
    precision: Optional[str] = typer.Option(None, help="auto (bf16 where the hardware has it: CUDA, or a CPU with AVX512-BF16 or AMX; else fp32), fp32 or bf16."),
    compile: Optional[bool] = typer.Option(None, "--compile/--no-compile", help="torch.compile the model."),
    fused_output: Optional[bool] = typer.Option(
        None, "--fused-output/--no-fused-output", help="alpha-ReLU only: fuse the output "
        "projection with the loss, never holding the N x V logits (same loss and gradients)."),
    set_: list[str] = typer.Option([], "--set", help="SECTION.KEY=VALUE: override any recipe key, "
                                   "e.g. --set train.lr=1.5. Repeatable."),
) -> None:
    """Train the Transformer with one output transform; writes log.csv, last.pt and best.pt.

    Multi-process: torchrun --nproc_per_node=N $(which arelu) train ... (gloo on CPU, nccl on GPU).
    """
    from arelu_cli.config import load_config, parse_override
    from arelu_cli.config import resolve_recipe
    from arelu_cli.train.loop import train as run_training
    from arelu_cli.train.run_dir import read_last
    from arelu_cli.train.stop_signals import Interrupted

    recipe = recipe and resolve_recipe(recipe)
    overrides = {(sec, key): value for sec, key, value in map(parse_override, set_)}
    flags = {("train", "transform"): transform, ("train", "tau"): _tau_option(tau),
             ("data", "path"): data, ("train", "max_steps"): max_steps,
             ("train", "max_minutes"): max_minutes, ("train", "seed"): seed,
             ("train", "device"): device, ("train", "precision"): precision,
             ("train", "compile"): compile, ("train", "fused_output"): fused_output}
    # a flag not given keeps what --set says
    overrides |= {key: value for key, value in flags.items() if value is not None}
    if allow_data_change and resume is None:
        raise UserError("--allow-data-change continues a run (--resume RUN) on changed data; "
                        "a new run needs no such flag, so drop it")
    if resume is not None and out is not None and out.resolve() != resume.resolve():
        raise UserError(f"--resume continues the run in its own folder ({resume}); drop --out "
                        f"{out}, or copy the run folder there and resume that")
    base = read_last(resume)["config"] if resume is not None and recipe is None else None
    if fused_output:  # the flag's own message, before the recipe's check would name the key
        plain = {key: value for key, value in overrides.items() if key != ("train", "fused_output")}
        check_fused_flag(load_config(recipe, plain, base=base).train.transform)
    config = load_config(recipe, overrides, base=base)
    check_tau_given(overrides.get(("train", "tau")), config.train.transform)
    folder = resume or out or Path("runs") / (recipe.stem if recipe else "default") / config.train.transform
    _build_engine(config.train.device, config.train.transform)
    try:
        summary = run_training(config, folder, resume=resume is not None,
                               recipe=recipe.stem if recipe else None, console=console,
                               allow_data_change=allow_data_change)
    except Interrupted as stopped:  # last.pt saved (or kept): say where, and how to go on
        if stopped.rank == 0:
            Console(stderr=True).print(escape(str(stopped)), highlight=False, soft_wrap=True)
        raise typer.Exit(stopped.code) from None
    if summary.rank == 0:
        tau_text = "" if summary.tau is None else f", tau {summary.tau:.4f}"
        best = (f"best validation loss {summary.best_dev_loss:.4f}"
                if summary.best_dev_loss is not None
                else f"best validation BLEU {summary.best_bleu:.2f}")
        console.print(f"{summary.steps} steps in {summary.seconds / 60:.1f} min "
                      f"({summary.tokens_per_s:,.0f} tok/s{tau_text}); {best} at step "
                      f"{summary.best_step}; wrote {summary.out}")


def check_tau_given(tau: object, transform: str) -> None:
    """A number given for tau (``--tau``, ``--set train.tau=``) with a transform that has no
    fixed threshold would be ignored: refuse it. (A recipe's numeric tau is kept, as
    ``reproduce`` trains its other transforms with the recipe that sets 1.5-ReLU's.)"""
    from arelu_cli.registry import get_transform

    if isinstance(tau, str) or tau is None or get_transform(transform).family == "relu":
        return
    raise UserError(f"--tau {tau:g} applies only to alpha-ReLU transforms (<a>-relu, e.g. "
                    f"1.5-relu); {transform} has no fixed threshold, so drop --tau")


def check_fused_flag(transform: str) -> None:
    """``--fused-output`` fuses alpha-ReLU's loss with the output projection; with another
    transform the flag itself is the mistake."""
    if not transform.strip().lower().endswith("-relu"):
        raise UserError(f"--fused-output works only with alpha-ReLU transforms (<a>-relu, e.g. "
                        f"1.5-relu), not {transform!r}; drop --fused-output")
