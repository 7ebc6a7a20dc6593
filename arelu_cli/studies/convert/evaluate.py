"""Evaluations of the conversion study's snapshots with ``lm-eval``'s metrics
(:mod:`arelu_cli.analysis.lm_eval`), the same code and settings as the PTB study's: a
``save_pretrained`` folder is loaded with ``transformers``, its stored output transform
applied again (:func:`arelu_cli.hf.use_transform`; a model without one is softmax) and read
through :func:`arelu_cli.hf.decoder.hf_decoder`.

An evaluation folder ``E`` holds per decoding ``E/DECODING.csv`` (one lm-eval row, written
last: the decoding is done when it exists), ``E/generations/DECODING.txt`` with its ``.json``
record and ``E/generations/DECODING.tokens.json`` (the continuations' token ids, from which
every generation statistic and bootstrap is recomputed). A row names its snapshot and its
generations by their paths in the study folder.
"""

from __future__ import annotations

from pathlib import Path

from arelu_cli.data.prepared import Prepared
from arelu_cli.studies.convert.recipe import Recipe
from arelu_cli.studies.generations import write_tokens


def settings(recipe: Recipe, stride: int | None = None):
    from arelu_cli.analysis.lm_eval import EvalSettings

    e = recipe.eval
    return EvalSettings(split="test", dev_split="dev", prefix_tokens=e.prefix_tokens,
                        max_prompts=e.prompts, max_tokens=e.max_new_tokens, seed=e.gen_seed,
                        stride=stride or e.stride)


def load(snapshot: Path, data: Prepared, block_size: int, seed: int, step: int | None = None,
         named: Path | None = None):
    """The snapshot as a :class:`~arelu_cli.decode.translate.Decoder` with its transform,
    its rows naming it ``named`` (default: ``snapshot``)."""
    from transformers import LlamaForCausalLM

    from arelu_cli.hf import use_transform
    from arelu_cli.hf.decoder import hf_decoder
    from arelu_cli.hf.use import CONFIG_KEY
    from arelu_cli.registry import get_transform

    model = LlamaForCausalLM.from_pretrained(snapshot)
    stored = getattr(model.config, CONFIG_KEY, None)
    transform = use_transform(model) if stored else get_transform("softmax")
    return hf_decoder(model, transform, data, path=named or snapshot, block_size=block_size,
                      seed=seed, step=step)


def paths(folder: Path, label: str) -> tuple[Path, Path, Path]:
    """A decoding's row, generations and generated token ids in evaluation folder ``folder``."""
    gen = folder / "generations" / f"{label}.txt"
    return folder / f"{label}.csv", gen, gen.with_suffix(".tokens.json")


def decodings(recipe: Recipe, transform_family: str) -> list:
    """How a model of this family is sampled: softmax at each ``[eval] softmax_top_p``,
    sparse models purely."""
    from arelu_cli.decode.sampling import Decoding

    if transform_family != "softmax":
        return [Decoding()]
    return [Decoding(top_p=None if p == 1 else p) for p in recipe.eval.softmax_top_p]


def evaluate(decoder, folder: Path, chosen: list, measured, out: Path) -> None:
    """Every decoding of ``chosen`` not yet in ``folder`` (module docstring); ``out``: the
    study folder, where the rows' paths start."""
    from arelu_cli.analysis import lm_eval
    from arelu_cli.decode.generate import write_generation

    for decoding in chosen:
        label = decoding.label()
        row_path, gen_path, ids_path = paths(folder, label)
        if row_path.is_file():
            continue
        gen_path.parent.mkdir(parents=True, exist_ok=True)
        row, generated = lm_eval.evaluate(decoder, decoding, measured, gen_path.relative_to(out))
        write_generation(generated, gen_path)
        write_tokens(ids_path, generated.tokens)
        lm_eval.merge_rows([row], row_path)


def dev_eps_ppl(decoder, measured) -> dict:
    """Dev epsilon-perplexity of pure sampling (eps tuned on dev), and its support: what the
    tau grid is chosen on."""
    from arelu_cli.analysis import lm_eval, lm_metrics as M
    from arelu_cli.decode.sampling import Decoding

    vocab = decoder.data.vocab_size
    values = lm_eval.step_values(decoder, measured.dev_split, Decoding(), measured)
    eps, ppl = M.tune_eps(values["p_target"], vocab)
    found = M.summarize(values, vocab, eps)
    return {"dev_eps_ppl": ppl, "eps": eps, "support_mean": found["support_mean"],
            "zero_share": found["zero_share"]}
