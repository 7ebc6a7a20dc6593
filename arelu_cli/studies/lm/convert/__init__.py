"""From a softmax-pretrained language model to alpha-ReLU: the conversion study.

A ``transformers`` Llama pretrained with softmax on a language-modelling corpus is fine-tuned
from its checkpoint, each arm for the same steps at several seeds: softmax continued (the
control), 1.5-ReLU with tau from the pretrained model's own logits (:func:`tau_for`), with tau
chosen on dev from a grid around it, with the analytic tau of an untrained model, exact
1.5-entmax, and 1.5-ReLU with LoRA at the tau rule that wins; a 1.5-ReLU model trained from
scratch for the same total steps is the reference. Every model is measured by ``lm-eval``'s
metrics along the way (:mod:`arelu_cli.analysis.lm_eval`, through
:mod:`arelu_cli.hf.decoder`). Everything trains and generates through the ``transformers``
integration (:mod:`arelu_cli.hf`), so the recipe a user copies is the one measured.

Modules: ``recipe`` (the TOML recipe), ``train`` (one resumable run), ``evaluate`` (lm-eval of
a snapshot), ``stages`` (which runs and evaluations, in which order).
"""
