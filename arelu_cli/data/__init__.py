"""Data: raw parallel text -> cleaned splits -> joint BPE -> a prepared folder -> token batches.

One job per module, imports flowing downward:

- :mod:`~arelu_cli.data.prepare`   ``arelu prepare``: the pipeline, no-op reruns, fingerprints
- :mod:`~arelu_cli.data.corpora`   the known corpora and their publishers' file layouts
- :mod:`~arelu_cli.data.toy`       the generated toy corpus (two made-up languages)
- :mod:`~arelu_cli.data.iwslt`     IWSLT'14 ``train.tags`` / XML formats and fairseq's split
- :mod:`~arelu_cli.data.download`  the Hugging Face hub or an archive URL, when no ``--source``
- :mod:`~arelu_cli.data.textio`    UTF-8 line reading with one-line errors
- :mod:`~arelu_cli.data.clean`     normalization and the training-pair filter
- :mod:`~arelu_cli.data.bpe`       byte-level BPE with lossless decoding
- :mod:`~arelu_cli.data.prepared`  the prepared folder: writing it atomically, reading it
- :mod:`~arelu_cli.data.prepare_request`  what ``arelu prepare`` is asked and answers
- :mod:`~arelu_cli.data.batch`     a batch, and the seeded, sharded order of an epoch's batches
- :mod:`~arelu_cli.data.batching`  token-budget, length-bucketed translation batches

Language modelling (``"task": "lm"`` folders, one text per split):

- :mod:`~arelu_cli.data.lm_corpora`  ptb, tinyshakespeare, text, toy-lm: files, splits, reading
- :mod:`~arelu_cli.data.lm_prepare`  ``arelu prepare`` for them
- :mod:`~arelu_cli.data.words`       word-level tokenization (PTB)
- :mod:`~arelu_cli.data.blocks`      the token stream cut into fixed-length blocks, batched

Training and decoding need two calls::

    from arelu_cli.data.batching import token_batches
    from arelu_cli.data.prepared import load_prepared

    data = load_prepared("data/toy")      # .vocab_size, .pad_id, .references("test"), ...
    for batch in token_batches(data, "train", max_tokens=4096, seed=0, epoch=0):
        batch.src, batch.tgt_in, batch.tgt_out   # (B, S), (B, T), (B, T) int64
"""
