"""Every causal LM family of the installed ``transformers``, built tiny, and whether the
fused output layer covers it (:func:`arelu_cli.hf.head.fused_head`): the table of
``docs/transformers.md`` (:func:`markdown`), generated from the code.

A family is a class of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, built from its own default
config (``cls.config_class()``) shrunk by :func:`tiny_config`: every size the config names
among :func:`sizes` set small, two layers (a layer-type list keeps one layer of each kind),
dropout, layer drop and router jitter off, special token ids inside the small vocabulary,
eager attention and experts (:func:`sized_config` builds the same at other sizes, for
``arelu bench hf``). No model type is named here; a family that the shrink cannot build, or that needs more
than token ids (image, audio or speech towers), is listed as not built, with why.

``python -m arelu_cli.hf.families`` prints the table; ``... --write docs/transformers.md``
writes it between the document's markers (:data:`START`, :data:`END`).
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import torch

VOCAB = 97
LAYERS = 2
WIDTH = 32
HEADS = 4
KV_HEADS = 2
MAX_PARAMETERS = 2_000_000
"""A shrunk config with more parameters than this kept a size :func:`sizes` does not name."""
TOWERS = ("vision", "audio", "speech", "image", "visual")
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_decoder_layers",
              "decoder_layers")


def sizes(width: int = WIDTH, layers: int = LAYERS, vocab: int = VOCAB,
          positions: int = 128) -> dict[str, int]:
    """Config sizes by the names configs give them, set wherever a config has them (and its
    default is a number): ``width`` (a multiple of 8) wide in :data:`HEADS` heads, MLPs
    twice as wide, mixtures of 4 experts (2 a token) half as wide, ``layers`` layers."""
    return {
        **dict.fromkeys(("hidden_size", "n_embd", "d_model", "n_embed", "embed_dim", "dim",
                         "model_dim", "hidden_dim", "word_embed_proj_dim", "emb_dim",
                         "dim_model", "pronunciation_embed_dim", "shape_embed_dim",
                         "backbone_hidden_size"), width),
        **dict.fromkeys(LAYER_KEYS, layers),
        **dict.fromkeys(("num_attention_heads", "n_head", "num_heads", "n_heads",
                         "decoder_attention_heads", "mamba_n_heads", "mamba_num_heads",
                         "linear_num_key_heads", "linear_num_value_heads"), HEADS),
        **dict.fromkeys(("head_dim", "kv_channels", "attention_head_dim", "qk_rope_head_dim",
                         "qk_nope_head_dim", "v_head_dim", "dim_head", "swa_head_dim",
                         "index_head_dim", "hidden_size_per_layer_input", "mamba_head_dim",
                         "linear_key_head_dim", "linear_value_head_dim"), width // HEADS),
        # State-space and linear-attention layers: small states and chunks.
        **dict.fromkeys(("mamba_d_state", "ssm_state_size", "state_size", "mamba_chunk_size",
                         "chunk_size"), 8),
        "mamba_d_ssm": 2 * width,
        **dict.fromkeys(("rotary_dim", "rotary_emb_dim"), width // (2 * HEADS)),
        **dict.fromkeys(("intermediate_size", "ffn_dim", "n_inner", "d_ff", "decoder_ffn_dim",
                         "ffn_hidden_size", "dim_ff"), 2 * width),
        **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size",
                         "shared_experts_intermediate_size", "expert_intermediate_size",
                         "moe_shared_expert_intermediate_size", "expert_ffn_hidden_size",
                         "q_lora_rank", "kv_lora_rank"), width // 2),
        **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts",
                         "moe_num_experts"), 4),
        **dict.fromkeys(("num_experts_per_tok", "moe_topk"), 2),
        **dict.fromkeys(("n_group", "topk_group", "n_groups", "mamba_n_groups"), 1),
        **dict.fromkeys(("vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size",
                         "pronunciation_vocab_size", "shape_vocab_size"), vocab),
        **dict.fromkeys(("zero_expert_num", "index_topk"), 2),
        "num_centroids": 8, "max_position_embeddings": positions,
    }


@dataclass(frozen=True)
class Family:
    """One causal LM class and what the fused output layer does with it."""

    cls: str
    model_types: tuple[str, ...]
    status: str
    """``covered``, ``refused`` or ``not built``."""
    detail: str
    """Covered: how its logits follow from the head; refused / not built: why."""


def _layer_kinds(values: list, count: int) -> list:
    """``count`` entries of a per-layer list, one of each kind first (a hybrid keeps an
    attention layer and a recurrent one)."""
    kinds = list(dict.fromkeys(map(str, values)))
    picked = [next(v for v in values if str(v) == k) for k in kinds][:count]
    return picked + values[len(picked):len(picked) + count - len(picked)]


def sized_config(config_class, width: int = WIDTH, layers: int = LAYERS, vocab: int = VOCAB,
                 positions: int = 128, eager: bool = True):
    """``config_class()`` with the :func:`sizes` it names, dropout, layer drop and router
    jitter off, special token ids inside the vocabulary; ``eager``: eager attention and
    experts (exact in float64), else transformers' defaults (faster)."""
    default = config_class().to_dict()
    over = {k: v for k, v in sizes(width, layers, vocab, positions).items()
            if isinstance(default.get(k), int) and not isinstance(default.get(k), bool)}
    if isinstance(default.get("num_key_value_heads"), int):
        same = default["num_key_value_heads"] == default.get("num_attention_heads")
        over["num_key_value_heads"] = HEADS if same else KV_HEADS
    count = next((default[k] for k in LAYER_KEYS if isinstance(default.get(k), int)), None)
    for key, value in default.items():
        if any(w in key for w in ("drop", "jitter")) and isinstance(value, float):
            over[key] = 0.0
        elif (key.endswith("token_id") and isinstance(value, int)
              and not isinstance(value, bool) and value >= vocab):
            over[key] = 2
        elif isinstance(value, list) and count and len(value) == count and value:
            over[key] = _layer_kinds(value, layers)
    if "is_decoder" in default:
        over["is_decoder"] = True
    if eager:
        over.update(attn_implementation="eager", experts_implementation="eager")
    return config_class(**over)


def tiny_config(config_class):
    """``config_class()`` shrunk (module docstring)."""
    return sized_config(config_class)


def _towers(config) -> list[str]:
    names = list(getattr(config, "sub_configs", {}) or {})
    return [n for n in names if any(t in n for t in TOWERS)]


def build(cls_name: str):
    """The tiny float64 model of ``cls_name`` in eval mode, or a ValueError saying why it
    cannot be built."""
    import transformers

    cls = getattr(transformers, cls_name)
    towers = _towers(cls.config_class())
    if towers:
        raise ValueError(f"needs more than token ids ({', '.join(towers)})")
    config = tiny_config(cls.config_class)
    with torch.device("meta"):
        size = sum(p.numel() for p in cls(config).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"the shrunk config keeps {size:,} parameters (a size it does not "
                         "name)")
    torch.manual_seed(0)
    return cls(config).double().eval()


def _why(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:100] if text else ''}".rstrip(": ")


def judge(cls_name: str, model_types: tuple[str, ...] = ()) -> tuple[Family, object]:
    """Build ``cls_name`` tiny and ask :func:`~arelu_cli.hf.use.check_model` and
    :func:`~arelu_cli.hf.head.fused_head` about it: its row, and the model (None when it
    was not built)."""
    from arelu_cli.hf.head import fused_head
    from arelu_cli.hf.use import check_model

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(cls_name)
            model(input_ids=torch.tensor([[3, 4, 5]]))
    except Exception as err:                        # any family's own failure: not built
        return Family(cls_name, model_types, "not built", _why(err)), None
    try:
        check_model(model)
        head = fused_head(model)
    except ValueError as err:
        return Family(cls_name, model_types, "refused", str(err)), model
    return Family(cls_name, model_types, "covered", head.describe()), model


def causal_classes() -> dict[str, tuple[str, ...]]:
    """Each causal LM class of the installed ``transformers`` and its model types."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    found: dict[str, tuple[str, ...]] = {}
    for model_type, cls_name in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()):
        found[cls_name] = found.get(cls_name, ()) + (model_type,)
    return found


def families() -> list[Family]:
    """:func:`judge` of every :func:`causal_classes` entry, by class name."""
    import transformers

    transformers.logging.set_verbosity_error()
    return [judge(cls, types)[0] for cls, types in sorted(causal_classes().items())]


def markdown(rows: list[Family]) -> str:
    """The families table: counts, then one row per class."""
    import transformers

    counts = {s: sum(r.status == s for r in rows) for s in ("covered", "refused", "not built")}
    head = (f"transformers {transformers.__version__}: {len(rows)} causal LM classes, "
            + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".\n\n"
            "| class | model types | fused | logits, or why |\n|---|---|---|---|\n")
    cell = lambda text: text.replace("|", "\\|")                        # noqa: E731
    return head + "".join(f"| {r.cls} | {', '.join(r.model_types)} | {r.status} | "
                          f"{cell(r.detail)} |\n" for r in rows)


START, END = "<!-- families: start -->", "<!-- families: end -->"
"""The markers around the table in ``docs/transformers.md``."""


def documented(text: str) -> str:
    """The families table between :data:`START` and :data:`END` of a document."""
    if START not in text or END not in text:
        raise ValueError(f"no {START} ... {END} section")
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def with_table(text: str, table: str) -> str:
    """``text`` with the section between the markers replaced by ``table``."""
    before, rest = text.split(START, 1)
    return f"{before}{START}\n{table}{END}{rest.split(END, 1)[1]}"


if __name__ == "__main__":
    table = markdown(families())
    if sys.argv[1:2] == ["--write"]:
        path = sys.argv[2]
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(with_table(text, table))
    else:
        sys.stdout.write(table)
