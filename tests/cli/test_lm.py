"""``arelu generate``: lines and a record written, reproducible with a seed, prompts from a
file with empty ones unconditional, and every bad input one line with exit 2 and nothing
written (decoding options, a translation checkpoint, an LM checkpoint given to translate,
NaN logits)."""

from __future__ import annotations

import json

import pytest

from arelu_cli.model import checkpoint
from arelu_cli.util.signatures import machine


def _cli_ok(cli, *args):
    ran = cli("generate", *args)
    assert ran.code == 0, ran.err
    return ran


def test_cli_writes_lines_and_a_record(cli, lm_runs, tmp_path):
    out = tmp_path / "gen.txt"
    _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--unconditional", "5", "--seed", "3",
            "--max-tokens", "6", "--tau", "0.05", "--out", out)
    lines = out.read_text().splitlines()
    meta = json.loads((tmp_path / "gen.txt.json").read_text())
    assert len(lines) == 5 and meta["prompts"] == 5 and meta["seed"] == 3
    assert meta["decoding"]["tau_shift"] == 0.05 and meta["decoding"]["label"] == "sample-tau+0.05"
    assert meta["checkpoint"].endswith("best.pt") and "transform:1.5-relu" in meta["signature"]
    assert meta["machine"] == machine("cpu")  # its seconds and tokens/s belong to this machine
    again = tmp_path / "again.txt"
    _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--unconditional", "5", "--seed", "3",
            "--max-tokens", "6", "--tau", "0.05", "--out", again)
    assert again.read_text() == out.read_text()


def test_cli_prompts_from_a_file_and_empty_prompts(cli, lm_runs, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Die\n\nDie\n")
    ran = _cli_ok(cli, "--checkpoint", lm_runs["softmax"], "--prompts", prompts,
                  "--decoding", "greedy", "--max-tokens", "4")
    lines = ran.out.splitlines()
    assert len(lines) == 3 and lines[0] == lines[2]


def _fails(cli, tmp_path, *args, match):
    out = tmp_path / "out.txt"
    ran = cli("generate", *args, "--out", out)
    assert ran.code == 2, ran.out
    assert match in ran.err, ran.err
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert not out.exists() and not (tmp_path / "out.txt.json").exists()


@pytest.mark.parametrize("args, match", [
    (("--top-p", "0"), "top-p must lie in (0, 1]"),
    (("--top-p", "1.5"), "top-p must lie in (0, 1]"),
    (("--top-k", "0"), "top-k must be a whole number of at least 1"),
    (("--temperature", "0"), "temperature must be a positive number"),
    (("--temperature", "-1"), "temperature must be a positive number"),
    (("--decoding", "beam"), "decoding method must be one of sample, greedy"),
])
def test_bad_decoding_options(cli, lm_runs, tmp_path, args, match):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2", *args,
           match=match)


def test_a_tau_shift_on_softmax(cli, lm_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2",
           "--tau", "0.1", match="a tau shift applies only to alpha-ReLU, not softmax")


def test_a_translation_checkpoint(cli, toy_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", toy_runs["softmax"], "--unconditional", "2",
           match="is a translation model's checkpoint; use it with arelu translate")


def test_translate_refuses_a_language_model(cli, lm_runs, tmp_path):
    ran = cli("translate", "--checkpoint", lm_runs["softmax"], "--split", "test")
    assert ran.code == 2 and "is a language model's checkpoint; use it with arelu generate" in ran.err
    assert ran.err.count("\n") == 1


def test_nan_logits(cli, lm_runs, tmp_path):
    ckpt = checkpoint.load(lm_runs["softmax"] / "best.pt")
    ckpt["model"]["output.bias"][:] = float("nan")
    checkpoint.save(ckpt, tmp_path / "nan" / "best.pt")
    _fails(cli, tmp_path, "--checkpoint", tmp_path / "nan", "--unconditional", "2",
           match="the logits hold NaN")


def test_an_empty_prompts_file(cli, lm_runs, tmp_path):
    (tmp_path / "none.txt").write_text("")
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--prompts", tmp_path / "none.txt",
           match="no prompts to continue")


def test_prompt_source_is_exactly_one(cli, lm_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2", "--split",
           "test", match="give exactly one of --prompts FILE")


def test_prefix_tokens_without_split_is_refused(cli, lm_runs, tmp_path):
    _fails(cli, tmp_path, "--checkpoint", lm_runs["softmax"], "--unconditional", "2",
           "--prefix-tokens", "3", match="--prefix-tokens sets how much of each --split line is "
           "the prompt; with --unconditional it does nothing, so drop it")
    _cli_ok(cli, "--checkpoint", lm_runs["softmax"], "--split", "test", "--prefix-tokens", "3",
            "--max-tokens", "2", "--out", tmp_path / "s.txt")


def _warnings(ran) -> list[str]:
    return [line for line in ran.err.splitlines() if line.startswith("warning:")]


def test_what_was_not_meant_is_warned_of(cli, lm_runs, tiny_lm_corpus, tmp_path):
    """Words outside the word-level vocabulary (read as <unk>), counted; a prompt cut to
    leave room for the continuation; a tau shift that made every draw the arg-max."""
    from arelu_cli.data.prepared import load_prepared

    word = load_prepared(tiny_lm_corpus).references("train")[0].split()[0]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(f"{word} zzqx <unk>\nqqqq qqqq\n" + f"{word} " * 40 + "\n")
    ran = _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--prompts", prompts,
                  "--max-tokens", "4", "--tau", "1000", "--out", tmp_path / "g.txt")
    text = " ".join(" ".join(_warnings(ran)).split())
    assert "3 prompt word(s) are not in the model's vocabulary and were read as <unk>: " \
           "'zzqx', 'qqqq'" in text
    assert "1 of 3 prompts were longer than 27 tokens (the model's 32 positions less one, " \
           "less room for --max-tokens 4 new ones) and kept only their last tokens" in text
    meta = json.loads((tmp_path / "g.txt.json").read_text())
    assert meta["unknown_words"] == 3 and meta["argmax_fallbacks"] == meta["draws"] > 0
    assert (f"{meta['draws']} of {meta['draws']} draws fell back to the arg-max token: "
            "alpha-ReLU's support was empty, so with --tau 1000 this was greedy decoding; give "
            "a smaller --tau") in text
    quiet = _cli_ok(cli, "--checkpoint", lm_runs["1.5-relu"], "--unconditional", "2",
                    "--max-tokens", "3", "--seed", "1", "--out", tmp_path / "q.txt")
    assert not [w for w in _warnings(quiet) if "greedy" in w or "<unk>" in w or "cut" in w]
