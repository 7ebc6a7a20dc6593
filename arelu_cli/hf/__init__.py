"""Hugging Face Transformers integration: any causal or seq2seq model of ``transformers``
trains with an arelu output transform as its loss and generates with its probabilities.

    from arelu_cli.hf import use_transform
    use_transform(model, "1.5-relu")      # or tau=..., fused=True (causal LMs), renormalize=True
    Trainer(model=model, ...).train()
    model.generate(input_ids, do_sample=True, temperature=0.7, top_p=0.9)   # or num_beams=4
    model.save_pretrained(path)           # the choice is kept in config.arelu ...
    use_transform(AutoModelForCausalLM.from_pretrained(path))   # ... and applied again

Modules, one job each: ``transform`` (name -> transform, the analytic tau for the model's
vocabulary, input checks), ``loss`` (the loss on HF's label conventions), ``head`` (whether
and how a model's logits follow from its head: the fused layer's view, derived from the
model), ``forward`` (the wrapped forwards: seq2seq loss, the fused output layer), ``search``
(arelu's beam search driven by an HF model), ``generate`` (``model.generate``), ``use``
(``use_transform``), ``families`` (every causal LM class of transformers built tiny and
judged: the docs table). Optional: needs ``pip install -e ".[hf]"``; docs/transformers.md.
"""

try:
    import transformers  # noqa: F401
except ImportError:
    raise ImportError('arelu_cli.hf needs Hugging Face Transformers: pip install -e ".[hf]"') from None

from arelu_cli.hf.generate import SearchOutput, generate
from arelu_cli.hf.loss import token_loss
from arelu_cli.hf.use import compute_loss_func, use_transform

__all__ = ["SearchOutput", "compute_loss_func", "generate", "token_loss", "use_transform"]
