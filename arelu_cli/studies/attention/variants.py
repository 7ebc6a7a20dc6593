"""The attention study's runs: one per ``[attention_study] variants`` entry, the recipe with
that attention for every kind (:func:`variant_model`), everything else fixed."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from arelu_cli.config import Config, ModelConfig
from arelu_cli.model.attention import RENORM_EPS, VARIANTS
from arelu_cli.registry import get_transform
from arelu_cli.studies.core import Run, run_config
from arelu_cli.util.errors import UserError

_LABEL = re.compile(r"^(?P<name>.+)-(?P<variant>" + "|".join(VARIANTS) + r")"
                    r"(?:-eps(?P<eps>\d+(?:\.\d+)?(?:e-?\d+)?))?$")


def variant_model(model: ModelConfig, label: str) -> ModelConfig:
    """``model`` with the attention of ``label`` for every kind (per-kind keys cleared): a
    registry name, or an alpha-ReLU name with its variant as a suffix and, for
    ``renormalized``, optionally its ``attention_eps`` (``1.5-relu-renormalized-eps0.01``;
    without one, the recipe's)."""
    match = _LABEL.match(label)
    name, relu = (match["name"], match["variant"]) if match else (label, model.attention_relu)
    try:
        transform = get_transform(name)
    except ValueError:
        raise UserError(
            f"[attention_study] variant {label!r} is not an attention configuration: give a "
            "normalized transform (softmax, sparsemax, <a>-entmax, e.g. 1.5-entmax) or an "
            f"alpha-ReLU with its variant ({', '.join(f'<a>-relu-{v}' for v in VARIANTS)}, "
            "optionally <a>-relu-renormalized-eps<E>), e.g. 1.5-relu-renormalized-eps0.01"
        ) from None
    if transform.family == "relu" and name == label:
        raise UserError(f"[attention_study] variant {label!r} must name its alpha-ReLU variant: "
                        f"{', '.join(f'{label}-{v}' for v in VARIANTS)}")
    if transform.family != "relu" and name != label:
        raise UserError(f"[attention_study] variant {label!r}: the -{relu} suffix is for "
                        f"alpha-ReLU attention only (e.g. 1.5-relu-{relu})")
    if match and match["eps"] and relu != "renormalized":
        raise UserError(f"[attention_study] variant {label!r}: -eps is the constant of the "
                        f"renormalized variant only (e.g. {name}-renormalized-eps0.01)")
    eps = float(match["eps"]) if match and match["eps"] else model.attention_eps
    if not eps > 0:
        raise UserError(f"[attention_study] variant {label!r}: eps must be > 0 (e.g. "
                        f"{name}-renormalized-eps0.01)")
    if transform.family != "relu" or relu != "renormalized":
        eps = RENORM_EPS
    if transform.family != "relu":  # the alpha-ReLU keys of the recipe are not this run's
        relu, tau = "raw", 0.0
    else:
        tau = model.attention_tau
    return dataclasses.replace(model, attention=name, attention_encoder="", attention_decoder="",
                               attention_cross="", attention_relu=relu, attention_tau=tau,
                               attention_eps=eps)


def variants(config: Config, out: Path) -> list[Run]:
    """The runs of the study, one per variant in the recipe's order, the baseline first: the
    recipe with the variant's attention, trained for ``max_steps``, never against the
    clock."""
    a = config.attention_study
    labels = [a.baseline] + [v for v in a.variants if v != a.baseline]
    return [Run(label, dataclasses.replace(run_config(config, max_minutes=0.0),
                                           model=variant_model(config.model, label)),
                out / "runs" / label)
            for label in labels]
