"""Training: the loop and its runtime (state, step, log, schedule, threads, signals,
precision, divergence guard, processes) and the run folder it writes. Uses decode (for
validation BLEU), model, data and below; never analysis, bench, studies or the CLI."""
