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
    eval_size: Optional[int] = typer.Option(None, help="Toy: dev and test pairs each, at least 1 (1000)."),
    toy_vocab: Optional[int] = typer.Option(None, help="Toy: content words per language, at least 100 (400)."),
    max_words: Optional[int] = typer.Option(None, help="Drop training pairs with a side longer than this."),
    max_ratio: Optional[float] = typer.Option(None, help="Drop training pairs whose word-count ratio exceeds this."),
    force: bool = typer.Option(
        False, "--force", help="Rebuild, even replacing a folder prepared from another corpus "
        "or other files (never a folder or file that arelu prepare did not write)."),
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
    from arelu_cli.reproduce import resolve_recipe
    from arelu_cli.results import write_rows

    if method in ("empirical", "both"):
        if recipe is None and data is None:
            raise UserError(f"--method {method} needs a model and data: give --recipe "
                            "(recipes/*.toml) and/or --data (a prepared folder)")
        config = load_config(recipe and resolve_recipe(recipe), {("data", "path"): data})
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
    from arelu_cli.reproduce import resolve_recipe
    from arelu_cli.train import train as run_training
    from arelu_cli.train_guard import Interrupted, check_tau_given, read_last

    recipe = recipe and resolve_recipe(recipe)
    overrides = {(sec, key): value for sec, key, value in map(parse_override, set_)}
    flags = {("train", "transform"): transform, ("train", "tau"): _tau_option(tau),
             ("data", "path"): data, ("train", "max_steps"): max_steps,
             ("train", "max_minutes"): max_minutes, ("train", "seed"): seed,
             ("train", "device"): device, ("train", "precision"): precision,
             ("train", "compile"): compile, ("train", "fused_output"): fused_output}
    # a flag not given keeps what --set says
    overrides |= {key: value for key, value in flags.items() if value is not None}
    if resume is not None and out is not None and out.resolve() != resume.resolve():
        raise UserError(f"--resume continues the run in its own folder ({resume}); drop --out "
                        f"{out}, or copy the run folder there and resume that")
    base = read_last(resume)["config"] if resume is not None and recipe is None else None
    config = load_config(recipe, overrides, base=base)
    check_tau_given(overrides.get(("train", "tau")), config.train.transform)
    folder = resume or out or Path("runs") / (recipe.stem if recipe else "default") / config.train.transform
    try:
        summary = run_training(config, folder, resume=resume is not None,
                               recipe=recipe.stem if recipe else None, console=console)
    except Interrupted as stopped:  # last.pt saved (or kept): say where, and how to go on
        if stopped.rank == 0:
            Console(stderr=True).print(escape(str(stopped)), highlight=False, soft_wrap=True)
        raise typer.Exit(stopped.code) from None
    if summary.rank == 0:
        tau_text = "" if summary.tau is None else f", tau {summary.tau:.4f}"
        console.print(f"{summary.steps} steps in {summary.seconds / 60:.1f} min "
                      f"({summary.tokens_per_s:,.0f} tok/s{tau_text}); best validation BLEU "
                      f"{summary.best_bleu:.2f} at step {summary.best_step}; wrote {summary.out}")


@app.command()
def reproduce(
    recipe: str = typer.Argument(..., help="Recipe name (toy, multi30k, iwslt14, wmt14-en-de, "
                                 "wmt13-en-ru: recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = typer.Option(None, help="Results folder (default results/NAME)."),
    source: Optional[Path] = typer.Option(
        None, help="Folder with the corpus files in the publisher's layout (see `arelu prepare`)."),
    transforms: Optional[str] = typer.Option(
        None, help="Comma-separated transforms (default: the recipe's [reproduce] transforms); "
        "'paper' is Table 1's grid: softmax,sparsemax,1.5-entmax,1.5-entmax-k100,1.5-relu."),
    steps: Optional[int] = typer.Option(
        None, help="Training steps per transform (default: the recipe's step budget)."),
    minutes: Optional[float] = typer.Option(
        None, help="Training minutes per transform; alone, it replaces the step budget "
        "(e.g. --minutes 6 for longer toy runs)."),
    tau_sweep: Optional[str] = typer.Option(
        None, help="Comma-separated fixed taus of the tau-sweep runs (default: the recipe's)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    gpu_watts: Optional[float] = typer.Option(
        None, help="Watts per GPU for the kWh column of training_time.csv."),
    seeds: Optional[str] = typer.Option(
        None, help="Comma-separated training seeds, e.g. 1,2,3: every run is trained and "
        "analysed once per seed, tables report mean ± std (default: the recipe's [reproduce] "
        "seeds, else its [train] seed)."),
) -> None:
    """The paper's whole grid for one recipe: prepare, tau, train every transform, translate,
    score, empty-check, sparsity, self-norm, timing, then every CSV, PNG and REPORT.md.

    Steps whose outputs exist are skipped, so running it again continues an interrupted grid.
    """
    from arelu_cli.reproduce import (Request, parse_seeds, parse_transforms,
                                     reproduce as run_grid, resolve_recipe)

    path = resolve_recipe(recipe)
    request = Request(
        path, out or Path("results") / path.stem, source, parse_transforms(transforms),
        minutes, steps, _float_list(tau_sweep, "--tau-sweep"), device, gpu_watts,
        parse_seeds(seeds), command="arelu " + " ".join(sys.argv[1:]))
    run_grid(request, console)


@app.command()
def study(
    recipe: str = typer.Argument(..., help="Recipe with \\[sweep] and \\[study] tables, e.g. "
                                 "multi30k-study (recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = typer.Option(None, help="Results folder (default results/NAME)."),
    source: Optional[Path] = typer.Option(
        None, help="Corpus files in the publisher's layout: prepare \\[data] path from them first."),
    corpus: str = typer.Option("multi30k", help="`arelu prepare` corpus name used with --source."),
    set_: list[str] = typer.Option([], "--set", help="SECTION.KEY=VALUE: override any recipe "
                                   "key, e.g. --set study.seeds=[1,2]. Repeatable."),
) -> None:
    """A comparison a reviewer accepts: a tuning sweep selected on dev BLEU, every transform
    at several seeds, convergence, test BLEU at equal steps and equal time, paired bootstrap.

    Every run has a step budget, so its BLEU cannot depend on what else the machine runs; the
    one timing stage (bench_train.csv, for equal time) wants an idle machine. Stages whose
    outputs exist are skipped: run the same command again to continue.
    """
    from arelu_cli.config import load_config, parse_override
    from arelu_cli.data.prepare import PrepareRequest, prepare as run_prepare
    from arelu_cli.reproduce import resolve_recipe
    from arelu_cli.study import study as run_study

    path = resolve_recipe(recipe)
    config = load_config(path, {(sec, key): value for sec, key, value in map(parse_override, set_)})
    if source is not None:
        run_prepare(PrepareRequest(corpus, Path(config.data.path), source=source),
                    log=console.print)
    report = run_study(config, out or Path("results") / path.stem, console, recipe=path.stem)
    console.print(f"study report: {report}")


def _float_list(text: Optional[str], option: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise UserError(f"{option} takes comma-separated numbers, got {text!r}") from None


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
    from arelu_cli.analysis.timing import device_path

    plan = bench.make_plan(quick=quick, transforms=transforms, sizes=sizes, repeats=repeats,
                           dtypes=dtype, device=device, threads=threads,
                           max_seconds=max_seconds, modes=modes)
    out = device_path(out, plan.device)
    frame = bench.run(plan, out, console=console)
    bench.print_table(frame, console)
    console.print(f"wrote {out}")


@bench_app.command("fused-linear")
def bench_fused_linear(
    out: Path = typer.Option(Path("results/bench/fused_linear.csv"), help="CSV file to write."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long case (256x4000, d=64)."),
    sizes: Optional[str] = typer.Option(None, help="Comma-separated NxV cases (default: 8192x40000)."),
    d: Optional[int] = typer.Option(None, "--d", help="Model width d (default: 512)."),
    dtype: Optional[str] = typer.Option(
        None, help="float32, bfloat16 or float16 (default: bfloat16 on CUDA, float32 on CPU)."),
    alpha: float = typer.Option(1.5, help="alpha of alpha-ReLU; tau is the paper's analytic estimate for V."),
    repeats: Optional[int] = typer.Option(None, min=1, help="Timed pairs per case (median is reported)."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
) -> None:
    """Time and peak memory of the fused linear + alpha-ReLU loss against Linear + loss; write CSV."""
    from arelu_cli.analysis import bench_fused as bench
    from arelu_cli.analysis.timing import device_path

    plan = bench.make_plan(quick=quick, sizes=sizes, width=d, dtype=dtype, alpha=alpha,
                           repeats=repeats, device=device)
    out = device_path(out, plan.device)
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
    fused: bool = typer.Option(False, "--fused", help="Add a row <a>-relu+fused per alpha-ReLU "
                               "transform: the step with the fused output layer (--fused-output)."),
    out: Optional[Path] = typer.Option(
        None, help="CSV file to write (default results/bench/train.csv, with --under-load "
        "results/bench/train_under_load.csv)."),
    under_load: bool = typer.Option(
        False, "--under-load", help="Instead: real training steps quiet, then beside a competing "
        "PyTorch process of the same priority, with torch's thread count fixed and with the "
        "thread governor (\\[train] threads = auto); CPU only."),
    load_steps: int = typer.Option(100, help="--under-load: measured steps per phase."),
    load_warmup: int = typer.Option(20, help="--under-load: unmeasured steps before the quiet phase."),
    load_threads: int = typer.Option(2, help="--under-load: threads of the competing process."),
    load_size: int = typer.Option(1024, help="--under-load: matrix size of the competitor's matmuls."),
) -> None:
    """Time whole training steps (tokens/s, peak memory) of each transform on one model and batch;
    with --under-load, training speed quiet and beside a competing process instead."""
    from arelu_cli.analysis import bench_train as bench
    from arelu_cli.analysis.tau_table import parse_list
    from arelu_cli.config import load_config
    from arelu_cli.reproduce import resolve_recipe
    from arelu_cli.results import write_rows

    config = load_config(resolve_recipe(recipe), {("train", "precision"): precision,
                                  ("data", "max_tokens"): max_tokens})
    names = parse_list(transforms, str, "--transforms") if transforms else list(bench.DEFAULT_TRANSFORMS)
    if under_load:
        from arelu_cli.analysis import bench_load

        if fused:
            raise UserError("--fused does not apply to --under-load, which trains each transform "
                            "as the recipe does; drop --fused")
        out = out or Path("results/bench/train_under_load.csv")
        rows = bench_load.bench_under_load(config, names, load_steps, load_warmup, load_threads,
                                           load_size, device, console=console)
        bench_load.print_table(write_rows(rows, out), console)
    else:
        out = out or Path("results/bench/train.csv")
        rows = bench.bench_train(config, names, repeats, device, warmup=warmup, console=console,
                                 fused=fused)
        from arelu_cli.analysis.timing import device_path
        out = device_path(out, rows[0]["device"])  # the GPU's name in it on CUDA
        bench.print_table(write_rows(rows, out), console)
    console.print(f"wrote {out}")


human_eval_app = typer.Typer(help="Blind human evaluation (paper Sec. 'Human Evaluation'): "
                             "export annotation sheets, then score the filled ones.",
                             no_args_is_help=True)
app.add_typer(human_eval_app, name="human-eval")


@human_eval_app.command("export")
def human_eval_export(
    source: Path = typer.Option(..., help="Source sentences of the test set, one a line."),
    reference: Path = typer.Option(..., help="Reference translations, aligned with --source."),
    system: list[str] = typer.Option(
        ..., "--system", help="NAME=FILE: a system's detokenized translations, aligned with "
        "--source. Repeatable (the paper: softmax, 1.5-entmax, 1.5-relu)."),
    out: Path = typer.Option(Path("results/human_eval"), help="Folder for the sheets and the "
                             "instructions (what annotators get); the key goes to OUT-key/."),
    items: int = typer.Option(135, help="Items per annotator (paper: 135)."),
    annotators: str = typer.Option("a1,a2", help="Annotator names, comma-separated."),
    shared: float = typer.Option(1 / 3, help="Fraction of each sheet every annotator gets, for "
                                 "Cohen's kappa (paper: 45 of 135)."),
    seed: int = typer.Option(0, help="Seed of the sample and of the candidate shuffles."),
) -> None:
    """Write one blind sheet per annotator (candidates incl. the reference, shuffled) and a key."""
    from arelu_cli.analysis.tau_table import parse_list
    from arelu_cli.data.textio import read_aligned, read_lines
    from arelu_cli.report import human_eval

    sources, references = read_aligned(source, reference)
    systems = {}
    for item in system:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--system takes NAME=FILE, got {item!r}")
        systems[name] = read_lines(Path(path))
    names = parse_list(annotators, str, "--annotators")
    # Filled-in sheets are the annotators' work, and a new key would no longer match them.
    taken = [path for path in (human_eval.key_path(out), out / "INSTRUCTIONS.txt",
                               *(out / f"sheet_{name}.csv" for name in names)) if path.exists()]
    if taken:
        raise UserError(f"{out} already holds {taken[0].name} of an earlier export (its sheets may "
                        "be filled in); choose another --out or move those files away")
    done = human_eval.export_sheets(sources, references, systems, out, n_items=items,
                                    annotators=names, seed=seed, shared_fraction=shared)
    for name, path in done.sheets.items():
        console.print(f"wrote {path} for {name} ({items} items, {done.n_shared} shared)")
    console.print(f"wrote {done.key}: keep it from the annotators; give them the folder "
                  f"{out} (sheets and INSTRUCTIONS.txt)")


@human_eval_app.command("score")
def human_eval_score(
    sheets: list[Path] = typer.Argument(..., help="The filled sheets (CSV)."),
    key: Path = typer.Option(..., help="key.csv written by `arelu human-eval export`."),
    out: Optional[Path] = typer.Option(
        None, help="Folder for table_human_eval.csv and human_eval_kappa.csv (default: the "
        "results folder that holds the key's folder, where `arelu report` reads them)."),
) -> None:
    """Mean and std per system, Cohen's kappa on the shared items; write CSV."""
    from arelu_cli.report import human_eval
    from arelu_cli.report.columns import write_csv

    systems, agreement = human_eval.score_sheets(sheets, key)
    folder = out or key.parent.parent
    write_csv(systems, folder, "table_human_eval.csv")
    write_csv(agreement, folder, "human_eval_kappa.csv")
    human_eval.print_scores(systems, agreement, console)
    console.print(f"wrote {folder / 'table_human_eval.csv'} and {folder / 'human_eval_kappa.csv'}")


@app.command("report")
def report(
    results_dir: Path = typer.Argument(..., help="Results folder (what `arelu reproduce` writes)."),
    runs: Optional[Path] = typer.Option(None, help="Folder of training runs, one per transform "
                                        "(default: RESULTS_DIR/runs)."),
    sweep_runs: Optional[Path] = typer.Option(
        None, help="Folder of the alpha-ReLU runs with different tau (default: RESULTS_DIR/tau-sweep)."),
    gpu_watts: Optional[float] = typer.Option(
        None, help="Power of one GPU in W, for the kWh column (paper: 250, 320, 300); "
        "without it kWh stays empty."),
    n_gpus: Optional[int] = typer.Option(None, help="GPUs per run for kWh (default: the run's processes)."),
    tau_csv: list[Path] = typer.Option([], "--tau-csv", help="An `arelu estimate-tau` CSV whose "
                                       "rows join Table 3 (e.g. the empirical tau). Repeatable."),
    command: list[str] = typer.Option([], "--command", help="A command that made this folder, "
                                      "listed in REPORT.md after RESULTS_DIR/commands.txt. Repeatable."),
) -> None:
    """Regenerate the CSVs computable here, draw every figure, and write REPORT.md."""
    import shlex

    from arelu_cli.report.build import regenerate

    this = ["arelu", "report", str(results_dir)]
    for flag, value in (("--runs", runs), ("--sweep-runs", sweep_runs),
                        ("--gpu-watts", gpu_watts), ("--n-gpus", n_gpus)):
        this += [flag, str(value)] if value is not None else []
    this += [part for path in tau_csv for part in ("--tau-csv", str(path))]
    done = regenerate(results_dir, [*command, shlex.join(this)], runs_dir=runs,
                      sweep_dir=sweep_runs, gpu_watts=gpu_watts, n_gpus=n_gpus, tau_csvs=tau_csv)
    for path in [*done.csvs, *done.pngs]:
        console.print(f"wrote {path}")
    console.print(f"wrote {done.report}")


_DECODE_HELP = {
    "checkpoint": "A checkpoint file, or a run folder (its best.pt, else last.pt); default: "
                  "the run trained most recently under ./runs.",
    "data": "Prepared corpus folder (default: the one the checkpoint was trained on).",
    "beam": "Beam size; 1 is greedy search (default: the checkpoint's \\[decode] beam, 5).",
    "length_penalty": "GNMT length penalty exponent for ranking finished hypotheses "
                      "(default: the checkpoint's, 0 = none, as OpenNMT-py).",
    "batch_tokens": "Source tokens per decoding batch (default: the checkpoint's \\[decode] max_tokens).",
    "renormalize": "alpha-ReLU only: divide the output by its sum at each step before taking "
                   "logs (default: the log of the unnormalized output, as trained).",
    "max_sentences": "At most this many sentences per split, drawn with --seed (default: all; "
                     "1000 of train).",
    "device": "auto, cpu or cuda.",
}


def _checkpoints(given: list[Path]) -> list[Path]:
    """The checkpoints given, else the run ``arelu train`` made most recently under ./runs
    (named on stderr, so that stdout keeps only what the command writes there)."""
    if given:
        return given
    from arelu_cli.translate import RUNS, latest_run

    run = latest_run()
    Console(stderr=True).print(f"using {escape(str(run))}, the most recently trained run under "
                               f"{RUNS}/ (--checkpoint chooses another)", highlight=False,
                               soft_wrap=True)
    return [run]


def _progress(total: int):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn("translating"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("translate", total=total)
    return bar, lambda n: bar.advance(task, n)


@app.command()
def translate(
    checkpoint: Optional[Path] = typer.Option(None, help=_DECODE_HELP["checkpoint"]),
    input: Optional[Path] = typer.Option(None, "--input", help="Raw source text, one sentence a "
                                         "line; - reads stdin (the default when it is a pipe "
                                         "and --split is not given)."),
    split: Optional[str] = typer.Option(None, help="Translate this split of the prepared corpus instead."),
    out: Optional[Path] = typer.Option(None, help="Output file, or - for stdout (the default); "
                                       "OUT.json records the run. Messages go to stderr."),
    beam: Optional[int] = typer.Option(None, help=_DECODE_HELP["beam"]),
    n_best: int = typer.Option(1, "--n-best", help="Write the K best hypotheses per line as "
                               "'i ||| translation ||| score' (K <= beam)."),
    length_penalty: Optional[float] = typer.Option(None, help=_DECODE_HELP["length_penalty"]),
    batch_tokens: Optional[int] = typer.Option(None, help=_DECODE_HELP["batch_tokens"]),
    renormalize: bool = typer.Option(False, "--renormalize", help=_DECODE_HELP["renormalize"]),
    data: Optional[Path] = typer.Option(None, help=_DECODE_HELP["data"]),
    device: str = typer.Option("auto", help=_DECODE_HELP["device"]),
) -> None:
    """Translate raw text (--input) or a prepared split (--split) by greedy or beam search.

    Scores: the transform's own log outputs; zero-probability tokens are pruned from the beam.
    Lines longer than the model's positions are cut (a warning names them; OUT.json counts them).
    """
    from arelu_cli import translate as tr

    if input is None and split is None and tr.stdin_is_piped():
        input = Path(tr.STDIO)  # `cat x.de | arelu translate > x.en`
    if (input is None) == (split is None):
        raise UserError("give exactly one of --input FILE (raw text, - for stdin) and --split "
                        "NAME (a split of the prepared corpus)")
    decoder = tr.open_checkpoint(_checkpoints([checkpoint] if checkpoint else [])[0], data, device)
    cfg = tr.decode_config(decoder, beam=beam, length_penalty=length_penalty, max_tokens=batch_tokens)
    if (input is not None and out is not None and tr.STDIO not in (str(input), str(out))
            and input.exists() and out.exists() and out.samefile(input)):
        raise UserError(f"--out {out} is the --input file: translating would overwrite the "
                        "source text; choose another --out")
    lines = tr.read_text_lines(input) if input is not None else None
    bar, advance = _progress(len(lines) if lines is not None else len(decoder.data.split(split)))
    with bar:
        result = tr.translate(decoder, cfg, lines=lines, split=split, n_best=n_best,
                              input_name=None if input is None else str(input),
                              renormalize=renormalize, progress=advance)
    tr.write_translation(result, out)
    stderr = Console(stderr=True)
    warning = tr.truncation_warning(result)
    if warning:
        stderr.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    to_file = out is not None and str(out) != tr.STDIO
    stderr.print(
        f"{decoder.transform.name}, beam {cfg.beam}: {len(result.hypotheses)} sentences in "
        f"{result.seconds:.2f} s ({result.sentences_per_s:.1f} sentences/s)"
        + (f"; wrote {escape(str(out))}" if to_file else ""), highlight=False, soft_wrap=True)


@app.command()
def score(
    hyp: Path = typer.Option(..., help="Detokenized translations, one a line (arelu translate --out)."),
    ref: Optional[Path] = typer.Option(
        None, help="References, one a line (default: the split named in HYP.json by arelu translate)."),
    out: Path = typer.Option(Path("results/scores.csv"), help="CSV to append the score's row to "
                             "(created if missing; an existing one must be an arelu score CSV)."),
) -> None:
    """Detokenized, case-sensitive BLEU and chrF (sacrebleu); append a row to a CSV.

    BLEU as in the paper (nrefs 1, case mixed, tok 13a, smooth exp); signatures printed.
    """
    from arelu_cli.analysis import score as scoring

    result = scoring.score_files(hyp, ref)
    scoring.append_row(scoring.score_row(result), out)
    console.print(f"BLEU {result.bleu:.2f}  [dim]{result.bleu_signature}[/]")
    console.print(f"chrF {result.chrf:.2f}  [dim]{result.chrf_signature}[/]")
    console.print(f"{result.sentences} sentences vs {escape(result.ref)}; appended to {out}")


@app.command("empty-check")
def empty_check(
    checkpoint: list[Path] = typer.Option([], help=_DECODE_HELP["checkpoint"] + " Repeatable."),
    split: list[str] = typer.Option(["dev"], help="Split(s) to check (paper: dev). Repeatable."),
    beam: Optional[int] = typer.Option(None, help=_DECODE_HELP["beam"]),
    length_penalty: Optional[float] = typer.Option(None, help=_DECODE_HELP["length_penalty"]),
    batch_tokens: Optional[int] = typer.Option(None, help=_DECODE_HELP["batch_tokens"]),
    renormalize: bool = typer.Option(False, "--renormalize", help=_DECODE_HELP["renormalize"]),
    max_sentences: Optional[int] = typer.Option(None, help=_DECODE_HELP["max_sentences"]),
    seed: int = typer.Option(0, help="Seed of the --max-sentences sample."),
    data: Optional[Path] = typer.Option(None, help=_DECODE_HELP["data"]),
    device: str = typer.Option("auto", help=_DECODE_HELP["device"]),
    out: Path = typer.Option(Path("results/empty_check.csv"), help="Summary CSV, one row per "
                             "checkpoint and split; OUT_sentences.csv gets both scores per sentence."),
) -> None:
    """Paper Table 2: % of sentences whose empty translation outscores the beam hypothesis."""
    from arelu_cli.analysis import empty_check as check
    from arelu_cli.results import write_rows
    from arelu_cli.translate import decode_config, open_checkpoint

    summaries, details = [], []
    for path in _checkpoints(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, length_penalty=length_penalty, max_tokens=batch_tokens)
        rows, sentences = check.measure(decoder, split, cfg, renormalize=renormalize,
                                        max_sentences=max_sentences, seed=seed)
        summaries += rows
        details += sentences
    frame = write_rows(summaries, out)
    write_rows(details, out.with_name(f"{out.stem}_sentences.csv"))
    for r in frame.to_dict("records"):
        console.print(f"{r['transform']} {r['split']}: empty better in {r['empty_better']}/"
                      f"{r['sentences']} ({r['empty_better_pct']:.1f}%), empty non-zero in "
                      f"{r['empty_nonzero_pct']:.1f}%, beam output empty in {r['beam_empty']}",
                      soft_wrap=True)
    console.print(f"wrote {out}")


@app.command()
def sparsity(
    checkpoint: list[Path] = typer.Option([], help=_DECODE_HELP["checkpoint"] + " Repeatable."),
    split: list[str] = typer.Option(["test"], help="Split(s) to measure, e.g. --split test "
                                    "--split train. Repeatable."),
    along: str = typer.Option("both", help="Steps teacher-forced on the references, along the "
                              "beam output, or both."),
    beam: Optional[int] = typer.Option(None, help=_DECODE_HELP["beam"]),
    batch_tokens: Optional[int] = typer.Option(None, help=_DECODE_HELP["batch_tokens"]),
    max_sentences: Optional[int] = typer.Option(None, help=_DECODE_HELP["max_sentences"]),
    seed: int = typer.Option(0, help="Seed of the --max-sentences sample."),
    data: Optional[Path] = typer.Option(None, help=_DECODE_HELP["data"]),
    device: str = typer.Option("auto", help=_DECODE_HELP["device"]),
    out: Optional[Path] = typer.Option(
        None, help="CSV: steps per number of zeros (default results/sparsity.csv); with "
        "--attention, zeros per layer and kind (default results/attention_sparsity.csv)."),
    plot: bool = typer.Option(False, "--plot", help="Also draw OUT.png (the paper's histogram; "
                              "with --attention, cross-attention heatmaps)."),
    attention: bool = typer.Option(
        False, "--attention", help="Measure the attention weights instead of the output: the "
        "share of exact zeros per layer and kind (encoder self, decoder self, cross), and the "
        "head-averaged cross-attention of --heatmaps sentences in OUT_heatmaps.csv."),
    heatmaps: int = typer.Option(3, help="--attention: sentences of the first split (beam "
                                 "output when measured) drawn in the heatmaps."),
) -> None:
    """Paper Figs. sparsity: the number of zero output components at every decoding step."""
    from arelu_cli import plots
    from arelu_cli.analysis import sparsity as sp
    from arelu_cli.analysis.steps import parse_along
    from arelu_cli.results import write_rows
    from arelu_cli.translate import decode_config, open_checkpoint

    alongs, rows = parse_along(along), []
    if attention:
        from arelu_cli.analysis import attention_sparsity as att

        out = out or Path("results/attention_sparsity.csv")
        frame, written = att.run(_checkpoints(checkpoint), split, alongs, out, data=data,
                                 device=device, beam=beam, batch_tokens=batch_tokens,
                                 max_sentences=max_sentences, seed=seed, heatmaps=heatmaps)
        if plot and heatmaps:
            written.append(plots.plot_attention_heatmaps(written[-1], out.with_suffix(".png")))
        for r in frame.to_dict("records"):
            console.print(f"{r['attention']} {r['split']} ({r['along']}) {r['kind']} layer "
                          f"{r['layer']}: {100 * r['zero_fraction']:.1f}% of weights zero, "
                          f"{100 * r['empty_fraction']:.1f}% of queries empty", soft_wrap=True)
        console.print("wrote " + ", ".join(map(str, written)))
        return
    out = out or Path("results/sparsity.csv")
    for path in _checkpoints(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, max_tokens=batch_tokens)
        rows += sp.measure(decoder, split, alongs, cfg, max_sentences=max_sentences, seed=seed)
    frame = write_rows(rows, out)
    for r in sp.summary(frame).to_dict("records"):
        console.print(f"{r['transform']} {r['split']} ({r['along']}): {r['steps']} steps, mean "
                      f"{r['mean_zeros']:.1f} of {r['vocab']} zero ({100 * r['mean_zero_fraction']:.1f}%), "
                      f"median {r['median_zeros']:.0f}, range {r['min_zeros']}-{r['max_zeros']}",
                      soft_wrap=True)
    console.print(f"wrote {out}" + (f" and {plots.plot_sparsity(out, out.with_suffix('.png'))}"
                                    if plot else ""))


@app.command("self-norm")
def self_norm(
    checkpoint: list[Path] = typer.Option([], help=_DECODE_HELP["checkpoint"] + " Repeatable."),
    split: list[str] = typer.Option(["test"], help="Split(s) to measure. Repeatable."),
    along: str = typer.Option("beam", help="Steps along the beam output (the paper's), "
                              "teacher-forced on the references, or both."),
    beam: Optional[int] = typer.Option(None, help=_DECODE_HELP["beam"]),
    batch_tokens: Optional[int] = typer.Option(None, help=_DECODE_HELP["batch_tokens"]),
    max_sentences: Optional[int] = typer.Option(None, help=_DECODE_HELP["max_sentences"]),
    seed: int = typer.Option(0, help="Seed of the --max-sentences sample."),
    data: Optional[Path] = typer.Option(None, help=_DECODE_HELP["data"]),
    device: str = typer.Option("auto", help=_DECODE_HELP["device"]),
    out: Path = typer.Option(Path("results/self_norm.csv"), help="Summary CSV (mean, std, "
                             "quantiles); OUT_hist.csv gets the histogram."),
    plot: bool = typer.Option(False, "--plot", help="Also draw OUT.png from the histogram."),
) -> None:
    """Paper Fig. self_norm: the distribution of sum_i alpha-ReLU_i(z) per decoding step."""
    from arelu_cli import plots
    from arelu_cli.analysis import self_norm as sn
    from arelu_cli.analysis.steps import parse_along
    from arelu_cli.results import write_rows
    from arelu_cli.translate import decode_config, open_checkpoint

    alongs, summaries, histograms = parse_along(along), [], []
    for path in _checkpoints(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, max_tokens=batch_tokens)
        rows, hist = sn.measure(decoder, split, alongs, cfg, max_sentences=max_sentences, seed=seed)
        summaries += rows
        histograms += hist
    frame = write_rows(summaries, out)
    hist_csv = out.with_name(f"{out.stem}_hist.csv")
    write_rows(histograms, hist_csv)
    for r in frame.to_dict("records"):
        console.print(f"{r['transform']} {r['split']} ({r['along']}): {r['steps']} steps, sum "
                      f"mean {r['mean']:.3f}, std {r['std']:.3f}, 5-95% [{r['q05']:.3f}, "
                      f"{r['q95']:.3f}]", soft_wrap=True)
    console.print(f"wrote {out}, {hist_csv}" + (
        f" and {plots.plot_self_norm(hist_csv, out.with_suffix('.png'))}" if plot else ""))


@bench_app.command("translate")
def bench_translate(
    checkpoints: Optional[str] = typer.Option(
        None, help="Comma-separated checkpoints or run folders (default: the run trained most "
        "recently under ./runs)."),
    beams: str = typer.Option("1,2,4,8,12", help="Comma-separated beam sizes."),
    split: str = typer.Option("test", help="Split of the prepared corpus to translate."),
    max_sentences: Optional[int] = typer.Option(None, help="Translate only this many sentences (seeded sample)."),
    repeats: int = typer.Option(1, help="Timed translations per model and beam, interleaved "
                                "(A, B, A, B, ...); the median is reported."),
    batch_tokens: Optional[int] = typer.Option(None, help=_DECODE_HELP["batch_tokens"]),
    data: Optional[Path] = typer.Option(None, help=_DECODE_HELP["data"]),
    device: str = typer.Option("auto", help=_DECODE_HELP["device"]),
    out: Path = typer.Option(Path("results/bench/translate.csv"), help="CSV to write; OUT.png too."),
) -> None:
    """Paper Fig. infTime: translation time per model and beam size, normalized by the fastest,
    and its ratio to the first softmax checkpoint's (else the first's) at each beam."""
    from arelu_cli import plots
    from arelu_cli.analysis import bench_translate as bench
    from arelu_cli.results import write_rows

    paths = _checkpoints([Path(part.strip()) for part in (checkpoints or "").split(",")
                          if part.strip()])
    rows = bench.bench_translate(paths, bench.parse_beams(beams), split, data=data, device=device,
                                 max_sentences=max_sentences, repeats=repeats,
                                 max_tokens=batch_tokens, log=console.log)
    bench.print_table(write_rows(rows, out), console)
    console.print(f"wrote {out} and {plots.plot_translation_time(out, out.with_suffix('.png'))}")

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
