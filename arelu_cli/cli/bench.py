"""``arelu bench loss|fused-linear|train|translate|generate|lm-study|support``: speed and
memory benchmarks, CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from arelu_cli.cli.app import DATA, DEVICE, MAX_TOKENS, bench_app, checkpoint_paths, console
from arelu_cli.util.errors import UserError


def _warn_if_busy(rows: list[dict]) -> None:
    from arelu_cli.bench.timing import warn_if_busy

    warn_if_busy(rows, console)


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
    variants: Optional[str] = typer.Option(
        None, help="Comma-separated variants to run, e.g. default,reuse_logits,liger (default: "
                   "all; --quick: no compiled or eager ones; liger on CUDA only)."),
    max_seconds: float = typer.Option(90.0, help="Time budget per case; fewer repeats beyond it."),
) -> None:
    """Time forward+backward and forward-only of every loss against F.cross_entropy; write CSV."""
    from arelu_cli.bench import loss as bench
    from arelu_cli.bench.timing import device_path

    plan = bench.make_plan(quick=quick, transforms=transforms, sizes=sizes, repeats=repeats,
                           dtypes=dtype, device=device, threads=threads,
                           max_seconds=max_seconds, modes=modes, variants=variants)
    out = device_path(out, plan.device)
    frame = bench.run(plan, out, console=console)
    bench.print_table(frame, console)
    _warn_if_busy(frame.to_dict("records"))
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
    methods: Optional[str] = typer.Option(
        None, help="Comma-separated methods: fused, fused-vocab, fused-tokens, fused-dense, "
                   "fused-tokens-dense, fused-tiles, unfused, liger, cce (default: "
                   "fused,fused-tokens,fused-dense,fused-tokens-dense on CPU; "
                   "fused,fused-tokens,fused-tiles,liger,cce on CUDA). Every method is timed "
                   "against unfused; unfused itself gets a row where named."),
    chunk: Optional[int] = typer.Option(
        None, help="Tokens per tile of the fused loss (default: the library's rule)."),
    vocab_chunk: Optional[int] = typer.Option(
        None, "--vocab-chunk",
        help="Vocabulary columns per tile of the fused loss's vocabulary loop (default: the "
             "library's rule)."),
) -> None:
    """Time and peak memory of the fused linear + alpha-ReLU loss against Linear + loss; write CSV."""
    from arelu_cli.bench import fused as bench
    from arelu_cli.bench.timing import device_path

    plan = bench.make_plan(quick=quick, sizes=sizes, width=d, dtype=dtype, alpha=alpha,
                           repeats=repeats, device=device, methods=methods, chunk=chunk,
                           vocab_chunk=vocab_chunk)
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
    precision: Optional[str] = typer.Option(None, help="auto (bf16 where the hardware has it: CUDA, or a CPU with AVX512-BF16 or AMX; else fp32), fp32 or bf16."),
    max_tokens: Optional[int] = typer.Option(None, help="Batch token budget (default: the recipe's)."),
    fused: bool = typer.Option(False, "--fused", help="Add a row <a>-relu+fused per alpha-ReLU "
                               "transform: the step with the fused output layer (--fused-output)."),
    label_smoothing: Optional[str] = typer.Option(
        None, help="Label smoothing of the timed steps: one number for every transform, or "
        "NAME=EPS pairs, e.g. softmax=0.1,1.5-relu=0 (`arelu study`'s bench stage times each "
        "transform at its selected one); default: the recipe's."),
    out: Optional[Path] = typer.Option(
        None, help="CSV file to write (default results/bench/train.csv, with --under-load "
        "results/bench/train_under_load.csv)."),
    under_load: bool = typer.Option(
        False, "--under-load", help="Instead: real training steps quiet, then beside a competing "
        "PyTorch process of the same priority, with torch's thread count fixed and with the "
        "thread governor (\\[train] threads = auto); CPU only."),
    load_steps: Optional[int] = typer.Option(None, help="--under-load: measured steps per phase "
                                             "[default: 100]."),
    load_warmup: Optional[int] = typer.Option(None, help="--under-load: unmeasured steps before "
                                              "the quiet phase [default: 20]."),
    load_threads: Optional[int] = typer.Option(None, help="--under-load: threads of the "
                                               "competing process [default: 2]."),
    load_size: Optional[int] = typer.Option(None, help="--under-load: matrix size of the "
                                            "competitor's matmuls [default: 1024]."),
) -> None:
    """Time whole training steps (tokens/s, peak memory) of each transform on one model and batch;
    with --under-load, training speed quiet and beside a competing process instead."""
    from arelu_cli.bench import train as bench
    from arelu_cli.util.options import parse_list, parse_per_name
    from arelu_cli.config import load_config
    from arelu_cli.config import resolve_recipe
    from arelu_cli.util.results import write_rows

    config = load_config(resolve_recipe(recipe), {("train", "precision"): precision,
                                  ("data", "max_tokens"): max_tokens})
    names = parse_list(transforms, str, "--transforms") if transforms else list(bench.DEFAULT_TRANSFORMS)
    load = {"--load-steps": load_steps, "--load-warmup": load_warmup,
            "--load-threads": load_threads, "--load-size": load_size}
    given = [flag for flag, value in load.items() if value is not None]
    if given and not under_load:
        raise UserError(f"{given[0]} applies only with --under-load; add --under-load or drop "
                        f"{given[0]}")
    if under_load:
        from arelu_cli.bench import load as bench_load
        from arelu_cli.util.ownership import check_replaceable

        if fused or label_smoothing is not None:
            raise UserError(f"{'--fused' if fused else '--label-smoothing'} does not apply to "
                            "--under-load, which trains each transform as the recipe does; "
                            "drop it")
        out = out or Path("results/bench/train_under_load.csv")
        check_replaceable(out, bench_load.COLUMNS)  # before minutes of measuring, not after
        rows = bench_load.bench_under_load(
            config, names, 100 if load_steps is None else load_steps,
            20 if load_warmup is None else load_warmup,
            2 if load_threads is None else load_threads,
            1024 if load_size is None else load_size, device, console=console)
        bench_load.print_table(write_rows(rows, out, bench_load.COLUMNS), console)
    else:
        out = out or Path("results/bench/train.csv")
        smoothing = (None if label_smoothing is None else
                     parse_per_name(label_smoothing, list(dict.fromkeys([bench.BASELINE, *names])),
                                    "--label-smoothing"))
        rows = bench.bench_train(config, names, repeats, device, warmup=warmup, console=console,
                                 fused=fused, label_smoothing=smoothing)
        from arelu_cli.bench.timing import device_path
        out = device_path(out, rows[0]["device"])  # the GPU's name in it on CUDA
        bench.print_table(write_rows(rows, out), console)
        _warn_if_busy(rows)
    console.print(f"wrote {out}")


@bench_app.command("hf")
def bench_hf(
    out: Path = typer.Option(Path("results/bench/hf.csv"), help="CSV file to write."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long subset (V 1000 and 4000, d 32)."),
    vocabs: Optional[str] = typer.Option(None, help="Comma-separated vocabulary sizes "
                                         "(default: 32768,131072)."),
    d_model: Optional[int] = typer.Option(None, help="Hidden size (default: 256)."),
    layers: Optional[int] = typer.Option(None, help="Decoder layers (default: 2)."),
    batch: Optional[int] = typer.Option(None, help="Sequences per step (default: 4)."),
    seq: Optional[int] = typer.Option(None, help="Tokens per sequence (default: 256)."),
    repeats: Optional[int] = typer.Option(None, min=1, help="Timed pairs per method (median)."),
    device: str = typer.Option("auto", help="cpu, cuda or auto (cuda adds Liger-Kernel's fused "
                               "linear cross-entropy)."),
    families: Optional[str] = typer.Option(
        None, help="Comma-separated transformers model types (default: llama; e.g. "
        "llama,qwen2,qwen3,gemma2,mistral,phi3,gpt_neox,granite,cohere)."),
) -> None:
    """A training step of small transformers causal LMs: softmax (their own loss), 1.5-ReLU
    and 1.5-ReLU with the fused output layer, time and peak memory; write CSV."""
    from arelu_cli.bench.timing import device_path
    from arelu_cli.util.options import parse_list
    from arelu_cli.util.results import write_rows

    try:
        import arelu_cli.hf  # noqa: F401
        from arelu_cli.bench import hf as bench
    except ImportError as err:
        raise UserError(str(err)) from None
    plan = bench.make_plan(quick=quick, vocabs=parse_list(vocabs, int, "--vocabs") if vocabs
                           else None, d_model=d_model, layers=layers, batch=batch, seq=seq,
                           repeats=repeats, device=device,
                           families=parse_list(families, str, "--families") if families else None)
    out = device_path(out, plan.device)
    rows = bench.run(plan, lambda done: write_rows(done, out))
    bench.print_table(rows, console)
    _warn_if_busy(rows)
    console.print(f"wrote {out}")


@bench_app.command("translate")
def bench_translate(
    checkpoints: Optional[str] = typer.Option(
        None, help="Comma-separated checkpoints or run folders (default: the run trained most "
        "recently under ./runs)."),
    beams: str = typer.Option("1,2,4,8,12", help="Comma-separated beam sizes."),
    split: str = typer.Option("test", help="Split of the prepared corpus to translate."),
    max_sentences: Optional[int] = typer.Option(None, help="Translate only this many sentences (seeded sample)."),
    transforms: Optional[str] = typer.Option(
        None, help="Decode each checkpoint's same weights once per listed transform (e.g. "
        "softmax,1.5-relu with a 1.5-ReLU checkpoint): the model's cost and, at beam 1, the "
        "outputs are then identical, and the ratios measure the output layer alone."),
    repeats: int = typer.Option(1, help="Timed translations per model and beam, interleaved "
                                "(A, B, A, B, ...); the median is reported."),
    max_tokens: Optional[int] = MAX_TOKENS,
    data: Optional[Path] = DATA,
    device: str = DEVICE,
    out: Path = typer.Option(Path("results/bench/translate.csv"), help="CSV to write; OUT.png too."),
) -> None:
    """Paper Fig. infTime: translation time per model and beam size, normalized by the fastest,
    and its ratio to the first softmax checkpoint's (else the first's) at each beam."""
    from arelu_cli.studies import plots
    from arelu_cli.bench import translate as bench
    from arelu_cli.util.options import parse_list
    from arelu_cli.util.results import write_rows

    paths = checkpoint_paths(parse_list(checkpoints or "", Path, "--checkpoints", empty_ok=True))
    rows = bench.bench_translate(paths, bench.parse_beams(beams), split, data=data, device=device,
                                 max_sentences=max_sentences, repeats=repeats,
                                 max_tokens=max_tokens,
                                 transforms=bench.parse_transforms(transforms), log=console.log)
    bench.print_table(write_rows(rows, out), console)
    _warn_if_busy(rows)
    console.print(f"wrote {out} and {plots.plot_inference_time(out, out.with_suffix('.png'))}")


@bench_app.command("generate")
def bench_generate(
    out: Path = typer.Option(Path("results/bench/generate.csv"), help="CSV file to write."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long subset (V=1000, d=32)."),
    vocabs: Optional[str] = typer.Option(None, help="Comma-separated synthetic vocabulary sizes "
                                         "(default: 10000,50000)."),
    batches: Optional[str] = typer.Option(None, help="Comma-separated batch sizes (default: 1,32)."),
    d: Optional[int] = typer.Option(None, "--d", help="Model width d (default: 512)."),
    steps: Optional[int] = typer.Option(None, help="Decoding steps per timing (default: 20)."),
    repeats: Optional[int] = typer.Option(None, help="Interleaved timings per method (default: 15)."),
    top_k: int = typer.Option(50, "--top-k", help="k of the softmax top-k row."),
    top_p: float = typer.Option(0.9, "--top-p", help="p of the softmax top-p (nucleus) row."),
    alpha: float = typer.Option(1.5, help="alpha of the alpha-entmax and alpha-ReLU rows."),
    logit_std: float = typer.Option(2.0, help="Std of the synthetic logits."),
    checkpoint: Optional[Path] = typer.Option(
        None, help="Take the output layer from this trained checkpoint (V from it) instead of "
        "synthetic weights."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
) -> None:
    """Time per generated token of pure alpha-ReLU sampling vs softmax sampling, top-k,
    top-p, sparsemax and entmax sampling on the same output layer; write CSV."""
    from arelu_cli.bench import generate as bench
    from arelu_cli.bench.timing import device_path

    plan = bench.make_plan(quick=quick, vocabs=vocabs, batches=batches, width=d, steps=steps,
                           repeats=repeats, top_k=top_k, top_p=top_p, alpha=alpha,
                           logit_std=logit_std, device=device, checkpoint=checkpoint)
    out = device_path(out, plan.device)
    frame = bench.run(plan, out, log=console.log)
    bench.print_table(frame, console)
    _warn_if_busy(frame.to_dict("records"))
    console.print(f"wrote {out}")


@bench_app.command("lm-study")
def bench_lm_study(
    study: Path = typer.Argument(..., help="A language-model study's folder (the --out of arelu "
                                 "study on an LM study recipe)."),
    batches: str = typer.Option("1,32", help="Comma-separated batch sizes (prompts generated "
                                "together); the study's report quotes the smallest."),
    new_tokens: Optional[int] = typer.Option(
        None, help="New tokens per timing (default: the study's [lm_study] max_new_tokens)."),
    repeats: int = typer.Option(5, help="Interleaved timings per model x decoding (medians)."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    weights: list[str] = typer.Option(
        [], "--weights", help="NAME=PATH: time this checkpoint for transform NAME instead of "
        "its seed runs' (a retrain of a seed run whose checkpoints were deleted; checked to "
        "have that run's settings and last step). Repeatable."),
    out: Optional[Path] = typer.Option(
        None, help="CSV file to write (default: STUDY/bench_generate.csv, which the study's "
        "report reads)."),
) -> None:
    """Time per generated token of the study's own models, every decoding it runs: the full
    model (incremental generation) and its output layer alone, with paired ratios to the
    softmax model's pure and nucleus sampling; write CSV. Run it on a quiet machine."""
    from arelu_cli.bench.lm import print_table
    from arelu_cli.util.options import parse_list
    from arelu_cli.studies.lm.bench import BenchPlan, bench_study, parse_weights
    from arelu_cli.studies.lm.runs import BENCH

    csv = out or study / BENCH
    plan = BenchPlan(batches=tuple(parse_list(batches, int, "--batches", example="1,32")),
                     new_tokens=new_tokens, repeats=repeats, device=device,
                     weights=parse_weights(weights))
    rows = bench_study(study, plan, csv, log=console.log).to_dict("records")
    print_table(rows, console)
    _warn_if_busy(rows)
    console.print(f"wrote {csv}")


@bench_app.command("support")
def bench_support(
    checkpoint: Path = typer.Argument(..., help="A trained checkpoint (a step-N.pt or last.pt; "
                                      "a run folder takes its newest)."),
    k: str = typer.Option(",".join(map(str, (100, 256, 512, 1024, 2048, 4096))), "--k",
                          help="Comma-separated partial-sort sizes to time (the full sort is "
                          "always timed)."),
    alpha: Optional[float] = typer.Option(
        None, help="1.5 or 2 (default: the checkpoint's own 1.5-entmax or sparsemax; needed for "
        "a model trained with another transform)."),
    split: str = typer.Option("train", help="The split whose rows are measured."),
    rows: int = typer.Option(4096, help="Target positions measured (the recipe's batch, say)."),
    repeats: int = typer.Option(5, help="Interleaved timings per loss (medians)."),
    seed: int = typer.Option(0, help="Seed of the rows drawn (and of their dropout)."),
    dropout: bool = typer.Option(True, "--dropout/--no-dropout",
                                 help="The model's dropout on, as training computes the loss; "
                                 "--no-dropout: eval mode."),
    data: Optional[Path] = DATA,
    device: str = DEVICE,
    out: Path = typer.Option(Path("results/bench/support.csv"), help="CSV file to write."),
) -> None:
    """How wide a trained model's entmax support is on its own rows, and the exact entmax
    loss's time (forward + backward) at each partial-sort k against F.cross_entropy: which
    k to train 1.5-entmax-k<k> or 2-entmax-k<k> with; write CSV. Run it on a quiet machine."""
    from arelu_cli.bench import support as bench
    from arelu_cli.bench.timing import device_path
    from arelu_cli.model.device import pick_device
    from arelu_cli.util.options import parse_list

    plan = bench.SupportPlan(checkpoint=checkpoint, data=data, split=split, rows=rows,
                             ks=tuple(parse_list(k, int, "--k", example="256,1024")),
                             alpha=alpha, repeats=repeats, seed=seed,
                             device=pick_device(device).type, dropout=dropout)
    out = device_path(out, plan.device)
    frame = bench.run(plan, out, log=console.log)
    bench.print_table(frame, console)
    _warn_if_busy(frame.to_dict("records"))
    best = frame[frame["fastest"] == True].iloc[0]  # noqa: E712 (a pandas mask)
    console.print(f"fastest: {best['loss']} ({best['ms']:,.0f} ms, "
                  f"{best['ratio_to_cross_entropy']:.1f}x F.cross_entropy); wrote {out}")
