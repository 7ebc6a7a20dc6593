"""``arelu generate`` and ``arelu lm-eval``: open-ended generation with a trained language
model, and its metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from arelu_cli.cli.app import CHECKPOINT, DATA, DEVICE, app, checkpoint_paths, stdin_is_piped
from arelu_cli.util.errors import UserError


def _decoding(method: str, top_k: Optional[int], top_p: Optional[float], temperature: float,
              tau: float):
    from arelu_cli.decode.sampling import Decoding

    try:
        return Decoding(method, top_k, top_p, temperature, tau)
    except ValueError as err:
        raise UserError(f"{err} (--decoding, --top-k, --top-p, --temperature, --tau)") from None


def _warnings(result, prompts: int, unknown: list[str], positions: int, decoding) -> list[str]:
    """What ``arelu generate`` did that the user may not have meant: prompts cut, prompt
    words read as <unk>, alpha-ReLU draws that fell back to the arg-max."""
    found, meta = [], result.meta
    if result.truncated:
        found.append(f"{len(result.truncated)} of {prompts} prompts were longer than "
                     f"{meta['truncated_to_tokens']} tokens (the model's {positions} positions "
                     f"less one, less room for --max-tokens {meta['max_tokens']} new ones) and "
                     "kept only their last tokens")
    if unknown:
        shown = ", ".join(repr(w) for w in dict.fromkeys(unknown))
        found.append(f"{len(unknown)} prompt word(s) are not in the model's vocabulary and "
                     f"were read as <unk>: {shown[:200]}")
    if meta["argmax_fallbacks"]:
        all_of = meta["argmax_fallbacks"] == meta["draws"]
        found.append(f"{meta['argmax_fallbacks']} of {meta['draws']} draws fell back to the "
                     "arg-max token: alpha-ReLU's support was empty"
                     + (f", so with --tau {decoding.tau_shift:g} this was greedy decoding; "
                        "give a smaller --tau" if all_of else ""))
    return found


@app.command()
def generate(
    checkpoint: Optional[Path] = CHECKPOINT,
    prompts: Optional[Path] = typer.Option(
        None, help="Prompts, one a line (an empty line: an unconditional sample); - reads stdin "
        "(the default when it is a pipe)."),
    split: Optional[str] = typer.Option(
        None, help="Prompt with the first --prefix-tokens tokens of each longer line of this "
        "split of the prepared corpus (Martins et al., 2020)."),
    prefix_tokens: Optional[int] = typer.Option(
        None, help="With --split: prompt tokens per line (default 5)."),
    unconditional: Optional[int] = typer.Option(None, help="Generate N samples from no prompt."),
    decoding: str = typer.Option("sample", help="sample (from the transform's own distribution; "
                                 "alpha-ReLU's divided by its sum) or greedy."),
    top_k: Optional[int] = typer.Option(None, help="Sample among the k most likely tokens."),
    top_p: Optional[float] = typer.Option(None, help="Nucleus sampling, p in (0, 1] (after "
                                          "--top-k)."),
    temperature: float = typer.Option(1.0, help="T > 0: sample from p^(1/T) over its sum (every "
                                      "transform; the support stays; T -> 0 is greedy)."),
    tau: float = typer.Option(0.0, help="alpha-ReLU only: add this to its tau at decode time "
                              "(> 0: sparser)."),
    seed: int = typer.Option(0, help="Seed of the draws: the same seed and batch size give the "
                             "same text."),
    batch_size: int = typer.Option(32, help="Prompts generated together."),
    max_tokens: int = typer.Option(100, help="New tokens per continuation at most (it also stops "
                                   "at the end of the sentence)."),
    out: Optional[Path] = typer.Option(None, help="Output file, or - for stdout (the default); "
                                       "OUT.json records the run."),
    data: Optional[Path] = DATA,
    device: str = DEVICE,
) -> None:
    """Continue prompts or sample unconditionally with a language model; one text a line.

    Prompts come from --prompts or --split, or none with --unconditional N. Prompts that
    leave no room for --max-tokens new tokens within the model's positions keep their last
    tokens. Warnings (and OUT.json) count them, the prompt words outside a word-level
    vocabulary (read as <unk>) and the alpha-ReLU draws that fell back to the arg-max
    because --tau emptied the support.
    """
    from arelu_cli.data.textio import STDIO, read_text_lines
    from arelu_cli.decode import generate as gen
    from arelu_cli.decode.translate import open_checkpoint

    if prompts is None and split is None and unconditional is None and stdin_is_piped():
        prompts = Path(STDIO)
    given = [name for name, value in (("--prompts", prompts), ("--split", split),
                                      ("--unconditional", unconditional)) if value is not None]
    if len(given) != 1:
        raise UserError("give exactly one of --prompts FILE (- for stdin), --split NAME and "
                        f"--unconditional N{'' if not given else ', not ' + ' and '.join(given)}")
    if unconditional is not None and unconditional < 1:
        raise UserError(f"--unconditional must be at least 1, got {unconditional}")
    if prefix_tokens is not None and split is None:
        raise UserError("--prefix-tokens sets how much of each --split line is the prompt; "
                        f"with {given[0]} it does nothing, so drop it")
    chosen = _decoding(decoding, top_k, top_p, temperature, tau)
    decoder = open_checkpoint(checkpoint_paths([checkpoint] if checkpoint else [])[0], data,
                              device, task="lm")
    gen.check_out(out, None if prompts is None else str(prompts))
    unknown: list[str] = []
    if prompts is not None:
        lines = read_text_lines(prompts)
        ids, unknown = gen.encode_prompts(decoder.data, lines), gen.unknown_words(decoder.data,
                                                                                 lines)
        source = {"prompts_file": str(prompts), "unknown_words": len(unknown)}
    elif split is not None:
        prefix_tokens = 5 if prefix_tokens is None else prefix_tokens
        ids, _ = gen.split_prompts(decoder.data, split, prefix_tokens)
        source = {"split": split, "prefix_tokens": prefix_tokens,
                  "split_sha256": decoder.data.split_checksum(split)}
    else:
        ids, source = [[] for _ in range(unconditional)], {"unconditional": unconditional}
    result = gen.generate(decoder, ids, chosen, seed=seed, batch_size=batch_size,
                          max_tokens=max_tokens, source=source)
    gen.write_generation(result, out)
    stderr = Console(stderr=True)
    for text in _warnings(result, len(ids), unknown, decoder.model.cfg.max_positions, chosen):
        stderr.print(f"[bold yellow]warning:[/] {escape(text)}", highlight=False,
                     soft_wrap=True)
    to_file = out is not None and str(out) != STDIO
    stderr.print(f"{decoder.transform.name}, {chosen.label()}: {len(ids)} continuations, "
                 f"{result.meta['generated_tokens']} tokens in {result.seconds:.2f} s"
                 + (f"; wrote {escape(str(out))}" if to_file else ""), highlight=False,
                 soft_wrap=True)


@app.command("lm-eval")
def lm_eval(
    checkpoint: list[Path] = typer.Option([], "--checkpoint", help="Language-model checkpoints "
                                          "or run folders (repeatable); default: the latest run."),
    split: str = typer.Option("test", help="Split measured and prompted from."),
    dev_split: str = typer.Option("dev", help="Split on which epsilon is tuned."),
    decoding: str = typer.Option("sample", help="sample or greedy (as for arelu generate)."),
    top_k: Optional[int] = typer.Option(None, help="Top-k (as for arelu generate)."),
    top_p: Optional[float] = typer.Option(None, help="Nucleus p in (0, 1] (as for arelu "
                                          "generate)."),
    temperature: float = typer.Option(1.0, help="T > 0: p^(1/T) over its sum (as for arelu "
                                      "generate)."),
    tau: float = typer.Option(0.0, help="alpha-ReLU only: decode-time shift of tau."),
    prefix_tokens: int = typer.Option(5, help="Prompt tokens per line of the split."),
    max_prompts: int = typer.Option(0, help="Generate from the first N prompts only (0: all)."),
    max_tokens: int = typer.Option(100, help="New tokens per continuation at most."),
    seed: int = typer.Option(0, help="Seed of the generation draws."),
    batch_size: int = typer.Option(32, help="Prompts generated together."),
    eval_tokens: int = typer.Option(2048, help="Tokens per teacher-forced batch."),
    stride: int = typer.Option(0, help="Teacher-forced windows every N tokens, each token "
                               "scored once with >= block_size - N tokens of context (0: the "
                               "block size, blocks that do not overlap)."),
    out: Path = typer.Option(Path("results/lm/lm_eval.csv"), help="CSV to add the rows to (a "
                             "row of the same checkpoint, decoding, split and seed is replaced)."),
    generations: Path = typer.Option(Path("results/lm/generations"),
                                     help="Folder of the generation files."),
    device: str = DEVICE,
) -> None:
    """A language model's metrics for one decoding (Martins et al., 2020); a CSV row each.

    Teacher-forced: perplexity, epsilon-perplexity, sparsemax score, JSD, rep/wrep, support
    size; generated: distinct-n, looping, Zipf, self-BLEU and length against the human text.
    """
    from arelu_cli.analysis import lm_eval as ev
    from arelu_cli.decode.translate import open_checkpoint

    chosen = _decoding(decoding, top_k, top_p, temperature, tau)
    for option, value in (("--prefix-tokens", prefix_tokens), ("--max-tokens", max_tokens),
                          ("--batch-size", batch_size), ("--eval-tokens", eval_tokens)):
        if value < 1:
            raise UserError(f"{option} must be at least 1, got {value}")
    if stride < 0:
        raise UserError(f"--stride must be >= 0 (0: the block size), got {stride}")
    if max_prompts < 0:
        raise UserError(f"--max-prompts must be >= 0 (0: all), got {max_prompts}")
    settings = ev.EvalSettings(split, dev_split, prefix_tokens, max_prompts, max_tokens, seed,
                               batch_size, eval_tokens, stride)
    decoders = [open_checkpoint(path, None, device, task="lm")
                for path in checkpoint_paths(checkpoint)]
    frame = ev.run(decoders, chosen, settings, out, generations)
    shown = frame.tail(len(decoders))
    for _, row in shown.iterrows():
        ppl = "" if pd_isna(row["ppl"]) else f"ppl {row['ppl']:.2f}, "
        Console(stderr=True).print(
            f"{row['transform']} {row['decoding']} on {split}: {ppl}eps-ppl {row['eps_ppl']:.2f} "
            f"(eps {row['eps']:g}), sp {row['sp']:.4f}, jsd {row['jsd']:.4f}, distinct-4 "
            f"{row['distinct_4']:.3f}", highlight=False, soft_wrap=True)
    Console(stderr=True).print(f"wrote {escape(str(out))} and {len(decoders)} generation "
                               f"file(s) in {escape(str(generations))}", highlight=False)


def pd_isna(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)
