"""Tiny Hugging Face models built from configs (no hub, no downloads): a Llama and a GPT-2
decoder and a BART and a T5 encoder-decoder, in float64, dropout off. ``scale`` multiplies the LM
head's weights so that the logits spread like a trained model's (std of a few units) and
alpha-ReLU has a support of a few tokens with tau = :data:`TAU`."""

from __future__ import annotations

import torch

# transformers is imported inside the functions: each test module skips itself
# (pytest.importorskip) when it is missing, which a conftest cannot do.

VOCAB = 37
TAU = 0.5
FAMILIES = ("softmax", "sparsemax", "1.5-entmax", "1.5-relu")
PAD, BOS, EOS = 0, 1, 2


def _config(kind: str):
    from transformers import BartConfig, GPT2Config, LlamaConfig, T5Config

    if kind == "llama":
        return LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                           max_position_embeddings=64, pad_token_id=PAD, bos_token_id=BOS,
                           eos_token_id=EOS, tie_word_embeddings=False)
    if kind == "gpt2":
        return GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2, n_positions=64,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, pad_token_id=PAD,
                          bos_token_id=BOS, eos_token_id=EOS)
    if kind == "t5":
        return T5Config(vocab_size=VOCAB, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8,
                        dropout_rate=0.0, pad_token_id=PAD, eos_token_id=EOS,
                        decoder_start_token_id=EOS, tie_word_embeddings=False)
    return BartConfig(vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1,
                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                      decoder_ffn_dim=32, max_position_embeddings=64, dropout=0.0,
                      attention_dropout=0.0, activation_dropout=0.0, pad_token_id=PAD,
                      bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=EOS,
                      forced_eos_token_id=None, tie_word_embeddings=False)


def make_model(kind: str, scale: float = 1.0, seed: int = 0):
    """A tiny float64 ``kind`` model ("llama", "gpt2", "bart", "t5"), eval mode."""
    from transformers import (BartForConditionalGeneration, GPT2LMHeadModel, LlamaForCausalLM,
                              T5ForConditionalGeneration)

    torch.manual_seed(seed)
    cls = {"llama": LlamaForCausalLM, "gpt2": GPT2LMHeadModel,
           "bart": BartForConditionalGeneration, "t5": T5ForConditionalGeneration}[kind]
    model = cls(_config(kind)).double().eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(scale)
    return model


def tokens(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    """(batch, length) ids avoiding the special tokens."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (batch, length), generator=gen)
