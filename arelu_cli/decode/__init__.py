"""Decoding a trained model: greedy and beam search, next-token sampling, translating files
and splits, open-ended generation, and BLEU (one function for validation and every reported
score). Uses model, data, transforms, registry, config and util; never train or above."""
