"""The translation model and everything that runs it: the Transformer and its attention,
training (loop, guards, log, schedule, threads, processes), checkpoints, search, inference
on files and splits, and validation (dev loss and BLEU). Uses transforms, registry, tau,
config and data; never analysis, report, pipeline or the CLI."""
