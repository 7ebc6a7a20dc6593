"""The ``arelu`` command line: thin Typer commands that parse, call the library, print.

Nothing imports this module; each command's work lives in a library module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from arelu_cli import __version__
from arelu_cli.errors import UserError

app = typer.Typer(
    name="arelu",
    help="Sparse output layers for text generation: alpha-ReLU vs softmax, sparsemax and "
    "alpha-entmax. Reproduces the tables and figures of 'Speeding Up Entmax'.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bench_app = typer.Typer(help="Speed and memory benchmarks that write CSV.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

console = Console()


def _version(value: bool) -> None:
    if value:
        console.print(f"arelu {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """arelu: sparse output layers for text generation."""


@app.command()
def prepare(
    corpus: str = typer.Argument(..., help="toy, multi30k, iwslt14, wmt14-en-de, wmt13-en-ru or custom."),
    out: Optional[Path] = typer.Option(None, help="Prepared folder to write (default: data/CORPUS)."),
    source: Optional[Path] = typer.Option(
        None, help="Folder with the corpus files in the publisher's layout; without it, download."),
    split_file: list[str] = typer.Option(
        [], "--split-file", help="SPLIT=SRC_FILE,TGT_FILE: read a split (train, dev, test) from "
        "these aligned plain-text files instead. Repeatable."),
    src_lang: Optional[str] = typer.Option(None, help="Source language code (default: the corpus's)."),
    tgt_lang: Optional[str] = typer.Option(None, help="Target language code (default: the corpus's)."),
    merges: Optional[int] = typer.Option(None, help="BPE merges (default: the paper's recipe for the corpus)."),
    joint: bool = typer.Option(True, "--joint/--separate", help="One BPE vocabulary for both languages, or one each."),
    seed: int = typer.Option(0, help="Seed of the toy generator."),
    train_size: Optional[int] = typer.Option(
        None, help="Toy: training pairs to generate (50000); others: keep the first N cleaned pairs."),
    eval_size: Optional[int] = typer.Option(None, help="Toy: dev and test pairs each (1000)."),
    toy_vocab: Optional[int] = typer.Option(None, help="Toy: content words per language (6000)."),
    max_words: Optional[int] = typer.Option(None, help="Drop training pairs with a side longer than this."),
    max_ratio: Optional[float] = typer.Option(None, help="Drop training pairs whose word-count ratio exceeds this."),
    force: bool = typer.Option(False, "--force", help="Rebuild, replacing whatever --out holds."),
) -> None:
    """Get a corpus, clean it, learn BPE and write a prepared folder (a no-op when up to date)."""
    from arelu_cli.data import prepare as prep

    request = prep.PrepareRequest(
        corpus=corpus, out=out or Path("data") / corpus, source=source,
        split_files=dict(prep.parse_split_file(item) for item in split_file),
        src_lang=src_lang, tgt_lang=tgt_lang, merges=merges, joint=joint, seed=seed, force=force,
        train_size=train_size, eval_size=eval_size, toy_vocab=toy_vocab,
        max_words=max_words, max_ratio=max_ratio)
    with console.status(f"preparing {corpus}") as status:
        result = prep.prepare(request, log=lambda step: status.update(f"{corpus}: {step}"))
    if not result.rebuilt:
        console.print(f"{result.path} is up to date (same inputs and options; --force rebuilds)")
        return
    console.print(prep.summary_table(result))


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
    alpha: str = typer.Option("1.5", help="entmax alpha(s) in (1, 2], comma-separated."),
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
    from arelu_cli.config import load_config
    from arelu_cli.results import write_rows

    if method in ("empirical", "both"):
        if recipe is None and data is None:
            raise UserError(f"--method {method} needs a model and data: give --recipe "
                            "(recipes/*.toml) and/or --data (a prepared folder)")
        config = load_config(recipe, {("data", "path"): data})
        rows = tau_table.empirical_rows(
            method, config, tau_table.parse_list(alpha, float, "--alpha"),
            tau_table.parse_list(rule, str, "--rule"), batches=batches)
        tau_table.print_table(write_rows(rows, out), console)
        console.print(f"wrote {out}")
        return
    rows = tau_table.tau_rows(
        method, tau_table.parse_list(d_vocab, int, "--d-vocab"),
        tau_table.parse_list(alpha, float, "--alpha"), tau_table.parse_list(rule, str, "--rule"),
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
    data: Optional[str] = typer.Option(None, help="Prepared corpus folder (overrides the recipe's data path)."),
    max_steps: Optional[int] = typer.Option(None, help="Optimizer steps to train for."),
    max_minutes: Optional[float] = typer.Option(
        None, help="Wall-clock budget in minutes, validation included (0: none)."),
    seed: Optional[int] = typer.Option(None, help="Seed of the initialization, data order and dropout."),
    device: Optional[str] = typer.Option(None, help="auto, cpu or cuda."),
    precision: Optional[str] = typer.Option(None, help="auto (bf16 on CUDA), fp32 or bf16."),
    compile: Optional[bool] = typer.Option(None, "--compile/--no-compile", help="torch.compile the model."),
    set_: list[str] = typer.Option([], "--set", help="SECTION.KEY=VALUE: override any recipe key, "
                                   "e.g. --set train.lr=1.5. Repeatable."),
) -> None:
    """Train the Transformer with one output transform; writes log.csv, last.pt and best.pt.

    Multi-process: torchrun --nproc_per_node=N $(which arelu) train ... (gloo on CPU, nccl on GPU).
    """
    from arelu_cli import checkpoint
    from arelu_cli.config import load_config, parse_override
    from arelu_cli.train import train as run_training

    overrides = {(sec, key): value for sec, key, value in map(parse_override, set_)}
    overrides |= {("train", "transform"): transform, ("train", "tau"): _tau_option(tau),
                  ("data", "path"): data, ("train", "max_steps"): max_steps,
                  ("train", "max_minutes"): max_minutes, ("train", "seed"): seed,
                  ("train", "device"): device, ("train", "precision"): precision,
                  ("train", "compile"): compile}
    base = checkpoint.load(resume)["config"] if resume is not None and recipe is None else None
    config = load_config(recipe, overrides, base=base)
    folder = resume or out or Path("runs") / (recipe.stem if recipe else "default") / config.train.transform
    summary = run_training(config, folder, resume=resume is not None,
                           recipe=recipe.stem if recipe else None, console=console)
    if summary.rank == 0:
        tau_text = "" if summary.tau is None else f", tau {summary.tau:.4f}"
        console.print(f"{summary.steps} steps in {summary.seconds / 60:.1f} min "
                      f"({summary.tokens_per_s:,.0f} tok/s{tau_text}); best validation BLEU "
                      f"{summary.best_bleu:.2f} at step {summary.best_step}; wrote {summary.out}")


@bench_app.command("loss")
def bench_loss(
    out: Path = typer.Option(Path("results/bench/loss.csv"), help="CSV file to write."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long subset (small shapes, few repeats)."),
    transforms: Optional[str] = typer.Option(
        None, help="Comma-separated transform names (default: every registered loss)."),
    sizes: Optional[str] = typer.Option(
        None, help="Comma-separated NxV cases, e.g. 2048x40000,8192x40000."),
    repeats: Optional[int] = typer.Option(None, min=1, help="Timed repeats per case (median is reported)."),
    dtype: Optional[str] = typer.Option(None, help="Comma-separated dtypes: float32, bfloat16, float16."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    threads: Optional[int] = typer.Option(None, min=1, help="torch threads (default: torch's choice)."),
    modes: Optional[str] = typer.Option(
        None, help="Comma-separated modes: fwd+bwd, fwd, transform (default: all)."),
    max_seconds: float = typer.Option(90.0, help="Time budget per case; fewer repeats beyond it."),
) -> None:
    """Time forward+backward and forward-only of every loss against F.cross_entropy; write CSV."""
    from arelu_cli.analysis import bench_loss as bench

    plan = bench.make_plan(quick=quick, transforms=transforms, sizes=sizes, repeats=repeats,
                           dtypes=dtype, device=device, threads=threads,
                           max_seconds=max_seconds, modes=modes)
    frame = bench.run(plan, out, console=console)
    bench.print_table(frame, console)
    console.print(f"wrote {out}")


@bench_app.command("fused-linear")
def bench_fused_linear(
    out: Path = typer.Option(Path("results/bench/fused_linear.csv"), help="CSV file to write."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long case (256x4000, d=64)."),
    sizes: Optional[str] = typer.Option(None, help="Comma-separated NxV cases (default: 8192x40000)."),
    d: Optional[int] = typer.Option(None, "--d", help="Model width d (default: 512)."),
    dtype: str = typer.Option("float32", help="float32, bfloat16 or float16."),
    alpha: float = typer.Option(1.5, help="alpha of alpha-ReLU; tau is the paper's analytic estimate for V."),
    repeats: Optional[int] = typer.Option(None, min=1, help="Timed pairs per case (median is reported)."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
) -> None:
    """Time and peak memory of the fused linear + alpha-ReLU loss against Linear + loss; write CSV."""
    from arelu_cli.analysis import bench_fused as bench

    plan = bench.make_plan(quick=quick, sizes=sizes, width=d, dtype=dtype, alpha=alpha,
                           repeats=repeats, device=device)
    frame = bench.run(plan, out)
    bench.print_table(frame, console)
    console.print(f"wrote {out}")


@bench_app.command("train")
def bench_train(
    recipe: Path = typer.Option(Path("recipes/multi30k.toml"), help="Recipe: model, data and batch size."),
    transforms: Optional[str] = typer.Option(
        None, help="Comma-separated transforms (default: the paper's five); softmax is the baseline."),
    repeats: int = typer.Option(10, help="Timed steps per transform (median is reported)."),
    warmup: int = typer.Option(2, help="Untimed steps per transform first."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    precision: Optional[str] = typer.Option(None, help="auto (bf16 on CUDA), fp32 or bf16."),
    max_tokens: Optional[int] = typer.Option(None, help="Batch token budget (default: the recipe's)."),
    out: Path = typer.Option(Path("results/bench/train.csv"), help="CSV file to write."),
) -> None:
    """Time whole training steps (tokens/s, peak memory) of each transform on one model and batch."""
    from arelu_cli.analysis import bench_train as bench
    from arelu_cli.analysis.tau_table import parse_list
    from arelu_cli.config import load_config
    from arelu_cli.results import write_rows

    config = load_config(recipe, {("train", "precision"): precision,
                                  ("data", "max_tokens"): max_tokens})
    names = parse_list(transforms, str, "--transforms") if transforms else list(bench.DEFAULT_TRANSFORMS)
    rows = bench.bench_train(config, names, repeats, device, warmup=warmup, console=console)
    bench.print_table(write_rows(rows, out), console)
    console.print(f"wrote {out}")


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    try:
        app()
    except UserError as err:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(err))}", highlight=False,
                                   soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
