"""Experiment configuration: frozen dataclasses mirrored by the TOML tables of ``recipes/``.

A recipe has up to nine tables, ``[data]``, ``[model]``, ``[train]``, ``[decode]``,
``[reproduce]`` (the paper's grid, ``arelu reproduce``), ``[study]`` (which study ``arelu
study`` runs, and its seeds), ``[sweep]``, ``[attention_study]`` and ``[lm_study]`` (the
studies' own settings), whose keys are the fields of :mod:`.schema` (each documented where it
is declared). Defaults are the paper's IWSLT'14 settings (Appendix "Optimization": Transformer
Base with FFN 1024, Adam (0.9, 0.998), Noam decay with lr 2.0 and 4000 warmup steps, dropout
0.3, no label smoothing). Unknown keys and wrong types (:mod:`.load`) and impossible values
(:mod:`.checks`) raise :class:`~arelu_cli.util.errors.UserError` saying what to do; command-line
flags override recipe values (:func:`load_config`). Standard library only.

- :mod:`.schema`: the dataclasses, one per table;
- :mod:`.checks`: values that are well typed but impossible (alpha-ReLU's fused output with
  softmax, a negative beam, NaN);
- :mod:`.load`: recipe files by name or path, TOML, ``--set`` overrides, the tables' types.
"""

from arelu_cli.config.checks import check_config
from arelu_cli.config.load import (RECIPES, from_dict, load_config, parse_override, read_recipe,
                                   recipe_tables, resolve_recipe)
from arelu_cli.config.schema import (SECTIONS, AttentionStudyConfig, Config, DataConfig,
                                     DecodeConfig, Device, ModelConfig, Precision,
                                     ReproduceConfig, StudyConfig, SweepConfig, TrainConfig)

__all__ = ["RECIPES", "SECTIONS", "AttentionStudyConfig", "Config", "DataConfig",
           "DecodeConfig", "Device", "ModelConfig", "Precision", "ReproduceConfig",
           "StudyConfig", "SweepConfig", "TrainConfig", "check_config", "from_dict",
           "load_config", "parse_override", "read_recipe", "recipe_tables", "resolve_recipe"]
