"""The reproduction report: the paper's tables and figures as fixed CSVs, PNGs and REPORT.md.

One module per job, all pure functions over artifacts that other commands wrote:

* :mod:`~arelu_cli.report.columns` -- the catalog: every CSV's file name, the paper item it
  redraws and its documented columns (:data:`~arelu_cli.report.columns.COLUMNS`);
* :mod:`~arelu_cli.report.paper` -- the paper's printed numbers and tolerances;
* :mod:`~arelu_cli.report.layout` -- where each (transform, seed) run, translation and
  analysis lives in a results folder;
* :mod:`~arelu_cli.report.seeds` -- values over training seeds: mean ± std (per-seed
  values) and ``seed_summary.csv``;
* :mod:`~arelu_cli.report.runs` -- training run folders -> training dynamics, tau/||z||
  evolution, training time (with kWh) and the tau sweep;
* :mod:`~arelu_cli.report.provenance` -- which runs a report uses (trained on the current
  version of its data, inside its grid) and the lines naming those it leaves out;
* :mod:`~arelu_cli.report.tables` -- the rows of Tables 1-3 and of the inference-time
  figure, from plain inputs;
* :mod:`~arelu_cli.report.distributions` -- the sparsity and self-normalization histograms;
* :mod:`~arelu_cli.report.examples` -- translation examples where two transforms disagree;
* :mod:`~arelu_cli.report.alpha_relu_graph` -- the graph of alpha-ReLU (pure math);
* :mod:`~arelu_cli.report.human_eval` -- blind annotation sheets and their scoring (Cohen's kappa);
* :mod:`~arelu_cli.report.plots` -- one PNG per figure CSV, drawn from the CSV only;
* :mod:`~arelu_cli.report.section` -- a report section: its Markdown table and verdict lines;
* :mod:`~arelu_cli.report.compare_tables`, :mod:`~arelu_cli.report.compare_figures` -- the
  sections of the tables and figures, with "matches / differs" verdicts against the paper;
* :mod:`~arelu_cli.report.quality` -- the quality floor below which verdicts are withheld;
* :mod:`~arelu_cli.report.reproduction_report` -- REPORT.md from whatever CSVs a results
  folder holds;
* :mod:`~arelu_cli.report.build` -- what ``arelu report`` regenerates in a results folder.
"""
