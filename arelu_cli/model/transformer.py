"""A Transformer encoder-decoder (Vaswani et al., 2017) returning logits only.

The paper trains Transformer Base with OpenNMT-py (Setup, Appendix "Optimization"); this
is the same network written out: sinusoidal positions, embeddings scaled by
``sqrt(d_model)``, pre-norm layers with a final layer norm on each stack (OpenNMT-py's
default Transformer), ReLU feed-forward layers, optional shared/tied embeddings. Every
weight matrix is Glorot/Xavier-uniform and every bias zero, so that for any input of the
untrained model the output projection sees a layer-normalized vector and its logits are
``N(0, 2 d_model / (d_model + d_vocab))`` (the paper's Lemma var_transformer), the
distribution the analytic tau assumes. The output transform is not part of the model: the
trainer picks it by name from :mod:`arelu_cli.registry`. The transform of the attention
scores is ``[model] attention`` (softmax by default; sparsemax, alpha-entmax or alpha-ReLU
per attention kind, beyond the paper: :mod:`arelu_cli.model.attention`).

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``D`` d_model, ``H`` heads,
``V`` target vocabulary. Decoding runs step by step with a per-layer key/value cache
(:class:`DecoderState`), so each new token costs one position, not the whole prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from arelu_cli.model import attention
from arelu_cli.config import ModelConfig
from arelu_cli.util.errors import UserError

KV = tuple[torch.Tensor, torch.Tensor]


class _MaskDropout(torch.autograd.Function):
    """Inverted dropout whose keep-mask is drawn with ``uniform_``."""

    @staticmethod
    def forward(ctx, x, p):
        keep = torch.empty_like(x).uniform_().ge_(p)  # 0/1 in x's dtype
        ctx.p = p
        ctx.save_for_backward(keep)
        return x * keep * (1.0 / (1.0 - p))

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad * keep * (1.0 / (1.0 - ctx.p)), None


class Dropout(nn.Module):
    """Dropout that is fast on CPU: ``nn.Dropout`` draws its mask with ``bernoulli_``, which
    took a fifth of a CPU training step; ``uniform_`` takes half as long. Elsewhere it is
    ``F.dropout``."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        return _MaskDropout.apply(x, self.p)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H)."""
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D/H) -> (B, T, D)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class _MultiHead(nn.Module):
    """What both attentions share: the transform of the scores, ``[model] attention`` for
    the ``kind`` (:mod:`arelu_cli.model.attention`), given the score std ``sigma`` at
    initialization of the subclass's projections. With ``keep_weights`` set, each call
    leaves its attention weights (B, H, T, S) in ``weights`` (for the analyses)."""

    def __init__(self, cfg: ModelConfig, kind: attention.Kind, sigma: float):
        super().__init__()
        self.heads, self.dropout = cfg.heads, cfg.attention_dropout
        self.transform = attention.for_kind(cfg, kind, sigma)
        self.keep_weights, self.weights = False, None

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        y, weights = attention.attend(q, k, v, self.transform, visible=mask, causal=causal,
                                      dropout_p=self.dropout if self.training else 0.0,
                                      need_weights=self.keep_weights)
        if self.keep_weights:
            self.weights = weights
        return self.out(_merge(y))


class SelfAttention(_MultiHead):
    """Multi-head self-attention with one fused QKV projection."""

    def __init__(self, cfg: ModelConfig, kind: attention.Kind):
        d_model = cfg.d_model  # Xavier-uniform on the fused (3D, D) matrix: fan-out 3D
        super().__init__(cfg, kind, attention.score_sigma(d_model, 3 * d_model, 3 * d_model))
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _qkv(self, x: torch.Tensor) -> list[torch.Tensor]:
        b, t, d = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.heads, d // self.heads)  # (B, T, 3, H, D/H)
        return list(qkv.permute(2, 0, 3, 1, 4).unbind(0))              # 3 x (B, H, T, D/H)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                causal: bool = False) -> torch.Tensor:
        """``mask`` (B, 1, 1, T) is True where a key may be attended; ``causal`` hides the future."""
        q, k, v = self._qkv(x)
        return self._attend(q, k, v, mask, causal)

    def step(self, x: torch.Tensor, cache: KV | None) -> tuple[torch.Tensor, KV]:
        """One new position (B, 1, D) attending to itself and the cached earlier ones."""
        q, k, v = self._qkv(x)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        return self._attend(q, k, v), (k, v)


class CrossAttention(_MultiHead):
    """Multi-head attention from decoder positions to the encoder's output."""

    def __init__(self, cfg: ModelConfig):
        d_model = cfg.d_model  # Xavier-uniform on (D, D) for queries, (2D, D) for keys/values
        super().__init__(cfg, "cross", attention.score_sigma(d_model, d_model, 2 * d_model))
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def memory_kv(self, memory: torch.Tensor) -> KV:
        """Keys and values of the encoder output, (B, H, S, D/H) each: computed once per source."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return _heads(k, self.heads), _heads(v, self.heads)

    def forward(self, x: torch.Tensor, kv: KV, mask: torch.Tensor) -> torch.Tensor:
        return self._attend(_heads(self.q(x), self.heads), kv[0], kv[1], mask)


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), Dropout(dropout),
                         nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg, "encoder")
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))
        return x + self.drop(self.ffn(self.norm2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn = SelfAttention(cfg, "decoder")
        self.cross_attn = CrossAttention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, memory_kv: KV, src_mask: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.self_attn(self.norm1(x), causal=True))
        x = x + self.drop(self.cross_attn(self.norm2(x), memory_kv, src_mask))
        return x + self.drop(self.ffn(self.norm3(x)))

    def step(self, x: torch.Tensor, memory_kv: KV, src_mask: torch.Tensor,
             cache: KV | None) -> tuple[torch.Tensor, KV]:
        y, cache = self.self_attn.step(self.norm1(x), cache)
        x = x + y
        x = x + self.cross_attn(self.norm2(x), memory_kv, src_mask)
        return x + self.ffn(self.norm3(x)), cache


def sinusoids(length: int, d_model: int) -> torch.Tensor:
    """(length, D) sinusoidal position encodings: sin on even, cos on odd dimensions."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    return table


@dataclass
class DecoderState:
    """What incremental decoding keeps per sentence: encoder keys/values and each decoder
    layer's self-attention cache. ``select`` keeps (or reorders) sentences of the batch."""

    memory_kv: list[KV]
    src_mask: torch.Tensor
    """(B, 1, 1, S) True at real source tokens."""
    self_kv: list[KV | None]
    step: int = 0

    def select(self, index: torch.Tensor) -> DecoderState:
        def pick(kv: KV | None) -> KV | None:
            return None if kv is None else (kv[0].index_select(0, index), kv[1].index_select(0, index))
        return DecoderState([pick(kv) for kv in self.memory_kv], self.src_mask.index_select(0, index),
                            [pick(kv) for kv in self.self_kv], self.step)


class TokenModel(nn.Module):
    """What the translation model and the language model share: Glorot initialization, the
    scaled embedding plus sinusoidal positions (``tgt_embed``, ``positions``, ``drop`` and
    ``cfg`` are the subclass's), and the parameter count."""

    cfg: ModelConfig

    def reset_parameters(self) -> None:
        """Glorot/Xavier-uniform matrices (OpenNMT-py's default), zero biases, unit norms."""
        for name, param in self.named_parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)
            elif name.endswith("bias"):
                nn.init.zeros_(param)

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        length = ids.shape[1] + offset
        if length > self.cfg.max_positions:
            raise UserError(f"a sequence of {length} tokens is longer than [model] max_positions "
                            f"= {self.cfg.max_positions}; raise it or filter long sentences")
        x = table(ids) * math.sqrt(self.cfg.d_model) + self.positions[offset:length]
        return self.drop(x)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class Transformer(TokenModel):
    """Encoder-decoder Transformer: ``model(src, tgt_in) -> logits (B, T, V)``."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0):
        super().__init__()
        if cfg.share_embeddings and src_vocab != tgt_vocab:
            raise UserError("[model] share_embeddings needs one joint vocabulary; prepare the "
                            "corpus with --joint or set share_embeddings = false")
        self.cfg, self.pad_id = cfg, pad_id
        self.src_embed = nn.Embedding(src_vocab, cfg.d_model)
        self.tgt_embed = self.src_embed if cfg.share_embeddings else nn.Embedding(tgt_vocab, cfg.d_model)
        self.register_buffer("positions", sinusoids(cfg.max_positions, cfg.d_model), persistent=False)
        self.drop = Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, tgt_vocab)
        self.reset_parameters()
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> memory (B, S, D) and the key mask (B, 1, 1, S), True at real tokens."""
        mask = (src != self.pad_id)[:, None, None, :]
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               keep: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced decoder: logits (B, T, V), or (N, V) at the N positions where
        ``keep`` (B, T) is True (the output projection then skips padding)."""
        return self.output(self._decode_hidden(tgt_in, memory, src_mask, keep))

    def _decode_hidden(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                       keep: torch.Tensor | None) -> torch.Tensor:
        x = self._embed(self.tgt_embed, tgt_in)
        for layer in self.decoder:
            x = layer(x, layer.cross_attn.memory_kv(memory), src_mask)
        x = self.decoder_norm(x)
        return x if keep is None else x[keep]

    def features(self, src: torch.Tensor, tgt_in: torch.Tensor,
                 keep: torch.Tensor | None = None) -> torch.Tensor:
        """The output projection's input: normed decoder states (B, T, D), or (N, D) with
        ``keep``; ``self.output`` of them are the logits ``forward`` returns. For losses
        fused with the projection (:mod:`arelu_cli.model.fused_output`)."""
        memory, src_mask = self.encode(src)
        return self._decode_hidden(tgt_in, memory, src_mask, keep)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                keep: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of every target position given the source: (B, T, V), or (N, V) with ``keep``."""
        return self.output(self.features(src, tgt_in, keep))

    def start(self, memory: torch.Tensor, src_mask: torch.Tensor) -> DecoderState:
        """The state before the first decoding step."""
        return DecoderState([layer.cross_attn.memory_kv(memory) for layer in self.decoder],
                            src_mask, [None] * len(self.decoder))

    def step(self, tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Feed the last tokens (B,) at position ``state.step``; logits (B, V) of the next one."""
        x = self._embed(self.tgt_embed, tokens[:, None], offset=state.step)  # (B, 1, D)
        for i, layer in enumerate(self.decoder):
            x, state.self_kv[i] = layer.step(x, state.memory_kv[i], state.src_mask, state.self_kv[i])
        state.step += 1
        return self.output(self.decoder_norm(x))[:, 0]
