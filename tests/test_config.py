"""Recipes: every shipped recipe loads; bad keys, types and values are clear UserErrors."""

from pathlib import Path

import pytest

from arelu_cli.config import Config, from_dict, load_config, parse_override
from arelu_cli.util.errors import UserError

OWN_TABLES = {"ptb-convert"}
"""Recipes of a study with its own tables, loaded by its tests (tests/studies/convert)."""
RECIPES = sorted(p for p in Path(__file__).resolve().parents[1].glob("recipes/*.toml")
                 if p.stem not in OWN_TABLES)


def test_defaults_are_the_papers_iwslt_settings():
    c = Config()
    assert (c.model.d_model, c.model.encoder_layers, c.model.heads, c.model.d_ff) == (512, 6, 8, 1024)
    assert (c.train.lr, c.train.warmup, c.train.adam_beta2, c.train.accum) == (2.0, 4000, 0.998, 8)
    assert from_dict({}) == c


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_loads(recipe):
    config = load_config(recipe)
    assert config.model.d_model % config.model.heads == 0


def test_paper_recipes_follow_the_appendix():
    wmt = load_config(next(r for r in RECIPES if r.stem == "wmt14-en-de"))
    ru = load_config(next(r for r in RECIPES if r.stem == "wmt13-en-ru"))
    assert (wmt.model.d_ff, wmt.train.warmup, wmt.train.accum, wmt.train.average_decay) == (2048, 8000, 4, 0.0005)
    assert wmt.model.tie_output and wmt.model.share_embeddings and wmt.model.dropout == 0.1
    assert ru.model.dropout == 0.3 and ru.train == wmt.train


def test_overrides_win_and_none_is_ignored(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text("[train]\nlr = 1.0\nwarmup = 10\n")
    config = load_config(recipe, {("train", "lr"): 3.0, ("train", "warmup"): None,
                                  ("train", "tau"): 0.25})
    assert (config.train.lr, config.train.warmup, config.train.tau) == (3.0, 10, 0.25)


@pytest.mark.parametrize("text, expected", [
    ("train.lr=1.5", ("train", "lr", 1.5)),
    ("model.tie_output=true", ("model", "tie_output", True)),
    ("train.tau=analytic", ("train", "tau", "analytic")),
    ("data.path=data/x", ("data", "path", "data/x")),
])
def test_parse_override(text, expected):
    assert parse_override(text) == expected


@pytest.mark.parametrize("tables, message", [
    ({"train": {"lr0": 1}}, r"unknown key\(s\) lr0 in \[train\]; known keys: transform"),
    ({"trian": {}}, r"unknown table\(s\) \[trian\]"),
    ({"train": {"warmup": "4000"}}, r"\[train\] warmup must be an integer"),
    ({"train": {"warmup": 1.5}}, r"\[train\] warmup must be an integer"),
    ({"model": {"tie_output": 1}}, r"\[model\] tie_output must be true or false"),
    ({"train": {"precision": "fp16"}}, r"\[train\] precision must be one of 'auto', 'fp32', 'bf16'"),
    ({"model": {"heads": 3}}, r"heads \(3\) must divide d_model \(512\)"),
    ({"model": {"dropout": 1.0}}, r"dropout must be in \[0, 1\)"),
    ({"train": {"lr": 0}}, r"\[train\] lr must be positive"),
    ({"train": {"lr": float("inf")}}, r"\[train\] lr must be positive and finite, got inf"),
    ({"train": {"adam_eps": float("nan")}}, r"\[train\] adam_eps must be positive and finite"),
    ({"train": {"max_minutes": -1}}, r"max_minutes must be >= 0"),
    ({"train": {"tau": "exact"}}, r"tau must be a number, 'auto' or 'analytic'"),
    ({"train": {"tau": float("nan")}}, r"\[train\] tau must be a finite number, 'auto' or"),
    ({"train": {"tau": float("inf")}}, r"\[train\] tau must be a finite number"),
    ({"train": {"tau": float("-inf")}}, r"\[train\] tau must be a finite number"),
    ({"train": {"adam_beta2": 1.0}}, r"adam_beta2 must be in \[0, 1\)"),
    ({"decode": {"max_length_offset": -1}}, r"max_length_offset must be >= 0"),
    ({"train": {"fused_output": True}},
     r"fused_output works only with alpha-ReLU transforms \(<a>-relu, e.g. 1.5-relu\), "
     r"not 'softmax'"),
    ({"train": {"fused_output": True, "transform": "1.5-entmax"}}, r"not '1.5-entmax'"),
    ({"model": {"encoder_layers": 0}}, r"\[model\] encoder_layers must be positive"),
    ({"data": {"task": "lm"}, "model": {"encoder_layers": -1}},
     r"\[model\] encoder_layers must be >= 0 \(a language model has no encoder and ignores "
     r"it\), got -1"),
    ({"train": {"label_smoothing": -0.1}}, r"\[train\] label_smoothing must be in \[0, 1\)"),
    ({"train": {"label_smoothing": 1.0}}, r"\[train\] label_smoothing must be in \[0, 1\)"),
    ({"train": {"label_smoothing": float("nan")}}, r"label_smoothing must be in \[0, 1\)"),
    ({"train": {"label_smoothing": "0.1"}}, r"\[train\] label_smoothing must be a number"),
    ({"train": {"label_smoothing": True}}, r"\[train\] label_smoothing must be a number"),
    ({"train": {"label_smoothng": 0.1}}, r"unknown key\(s\) label_smoothng in \[train\]"),
    ({"reproduce": {"transforms": "softmax"}}, r"\[reproduce\] transforms must be a list"),
    ({"reproduce": {"transforms": []}}, r"transforms must name at least one"),
    ({"reproduce": {"beams": [1, 0]}}, r"\[reproduce\] beams must be at least 1"),
    ({"reproduce": {"tau_sweep": [0.1, "x"]}}, r"\[reproduce\] tau_sweep must be a number"),
    ({"reproduce": {"train_minutes": -1}}, r"train_minutes must be >= 0"),
    ({"reproduce": {"timing_repeats": 0}}, r"\[reproduce\] timing_repeats must be positive"),
    # NaN passes every comparison with a bound, and no budget, rate or power is infinite
    ({"reproduce": {"train_minutes": float("nan")}}, r"\[reproduce\] train_minutes must be a "
                                                      r"finite number, got nan"),
    ({"reproduce": {"train_minutes": float("inf")}}, r"\[reproduce\] train_minutes must be a finite"),
    ({"reproduce": {"gpu_watts": float("inf")}}, r"\[reproduce\] gpu_watts must be a finite"),
    ({"reproduce": {"gpu_watts": -250.0}}, r"\[reproduce\] gpu_watts must be >= 0"),
    ({"reproduce": {"sweep_minutes": float("nan")}}, r"\[reproduce\] sweep_minutes must be a finite"),
    ({"reproduce": {"tau_sweep": [0.1, float("inf")]}}, r"\[reproduce\] tau_sweep must be a finite"),
    ({"sweep": {"lr": [1.0, float("inf")]}}, r"\[sweep\] lr must be a finite number, got inf"),
    ({"sweep": {"extend": -1}}, r"\[sweep\] extend must be >= 0"),
    ({"sweep": {"extend": 1, "lr": [0.4]}}, r"\[sweep\] extend = 1 steps past the ends of "
                                             r"\[sweep\] lr .* lists 1; list at least two"),
    ({"sweep": {"extend": 1}}, r"lists 0; list at least two"),
    ({"study": {"equal_time_minutes": float("nan")}}, r"\[study\] equal_time_minutes must be a "
                                                      r"finite"),
    ({"train": {"max_minutes": float("nan")}}, r"\[train\] max_minutes must be >= 0"),
    ({"train": {"warmup": -5}}, r"\[train\] warmup must be positive"),
    ({"model": {"attention_eps": 0.0}}, r"\[model\] attention_eps must be a finite number > 0"),
    ({"model": {"attention_eps": float("nan")}}, r"\[model\] attention_eps must be a finite"),
    ({"train": {"seed": -1}}, r"\[train\] seed must be >= 0, got -1"),
    ({"reproduce": {"seeds": [1, 1]}}, r"\[reproduce\] seeds must be distinct integers >= 0"),
    ({"study": {"seeds": [1, -2]}}, r"\[study\] seeds must be distinct integers >= 0"),
])
def test_bad_values_say_what_to_do(tables, message):
    with pytest.raises(UserError, match=message):
        from_dict(tables)


def test_reproduce_lists_round_trip_through_checkpoints():
    config = from_dict({"reproduce": {"transforms": ["softmax", "1.5-relu"], "tau_sweep": [0, 5],
                                      "beams": [1, 4]}})
    r = config.reproduce
    assert r.transforms == ("softmax", "1.5-relu") and r.tau_sweep == (0.0, 5.0)
    assert r.beams == (1, 4) and from_dict(config.to_dict()) == config
    assert Config().reproduce.transforms[-1] == "1.5-relu"


def test_label_smoothing_defaults_to_the_papers_none_and_round_trips():
    assert Config().train.label_smoothing == 0.0
    config = load_config(None, {("train", "label_smoothing"): 0.1})
    assert config.train.label_smoothing == 0.1 and from_dict(config.to_dict()) == config
    assert parse_override("train.label_smoothing=0.1") == ("train", "label_smoothing", 0.1)
    assert from_dict({"train": {"label_smoothing": 0}}).train.label_smoothing == 0.0


def test_fused_output_with_alpha_relu():
    config = from_dict({"train": {"transform": "1.2-relu", "fused_output": True}})
    assert config.train.fused_output and not from_dict({}).train.fused_output
    smoothed = from_dict({"train": {"transform": "1.5-relu", "fused_output": True,
                                    "label_smoothing": 0.1}})
    assert smoothed.train.fused_output and smoothed.train.label_smoothing == 0.1


def test_bad_recipe_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[train\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")
    with pytest.raises(UserError, match="SECTION.KEY=VALUE"):
        parse_override("lr=1")


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), r"recipe \S+ is a folder, not a file; give a TOML file"),
    (lambda p: p.write_bytes(b"\xff\xfe[train]"), r"recipe \S+ is not UTF-8 text"),
])
def test_a_recipe_that_is_no_text_file_is_one_line(tmp_path, make, message):
    """From Python as from the CLI: a folder or a binary file is a UserError, not an
    IsADirectoryError or UnicodeDecodeError."""
    make(tmp_path / "r.toml")
    with pytest.raises(UserError, match=message) as info:
        load_config(tmp_path / "r.toml")
    assert "\n" not in str(info.value)


def test_nan_and_inf_from_a_toml_recipe_are_refused(tmp_path):
    """TOML spells them ``nan`` and ``inf``."""
    recipe = tmp_path / "r.toml"
    recipe.write_text("[reproduce]\ngpu_watts = nan\n")
    with pytest.raises(UserError, match=r"\[reproduce\] gpu_watts must be a finite number"):
        load_config(recipe)


def test_a_language_model_may_say_it_has_no_encoder(tiny_lm_corpus, tiny_lm_config, tmp_path):
    """``encoder_layers = 0`` in an LM recipe (it has no encoder) loads and trains."""
    from arelu_cli.config import load_config
    from arelu_cli.train.loop import train

    base = tiny_lm_config(tiny_lm_corpus, max_steps=2, valid_every=2, save_every=2)
    config = load_config(None, {("data", "task"): "lm", ("model", "encoder_layers"): 0},
                         base=base.to_dict())
    assert config.model.encoder_layers == 0
    assert train(config, tmp_path / "run").steps == 2
