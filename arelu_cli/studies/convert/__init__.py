"""From a softmax-pretrained language model to alpha-ReLU: the conversion study (``[study]
kind = "convert"``, ``arelu study recipes/ptb-convert.toml``).

A ``transformers`` Llama pretrained with softmax on a language-modelling corpus is fine-tuned
from its checkpoint, each arm for the same steps at several seeds: softmax continued (the
control), 1.5-ReLU with tau from the pretrained model's own logits (:func:`tau_for`), with tau
chosen on dev from a grid around it, with the analytic tau of an untrained model, exact
1.5-entmax, and 1.5-ReLU with LoRA at the tau rule that wins; a 1.5-ReLU model trained from
scratch for the same total steps is the reference. Every model is measured by ``lm-eval``'s
metrics along the way (:mod:`arelu_cli.analysis.lm_eval`, through
:mod:`arelu_cli.hf.decoder`). Everything trains and generates through the ``transformers``
integration (:mod:`arelu_cli.hf`), so the recipe a user copies is the one measured. It asks:
after how many steps is converted 1.5-ReLU within 2% of the control's epsilon-perplexity (or
what gap remains), how does each tau rule compare, is pure sampling from it as
non-degenerate as nucleus sampling from the control, and does LoRA suffice?

Modules: ``recipe`` (its own tables), ``train`` (one resumable run), ``evaluate`` (lm-eval of
a snapshot), ``layout`` (the folder's files, the arms' runs, what is missing), ``stages``
(which runs and evaluations, in which order), ``tables``, ``claims``, ``plots`` and
``report`` (``REPORT.md``), ``study`` (its :class:`~arelu_cli.studies.contract.Study`).
"""
