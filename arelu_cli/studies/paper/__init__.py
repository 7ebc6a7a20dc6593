"""The paper's grid (``[study] kind = "paper"``, ``arelu reproduce RECIPE``): the tables and
figures of *Speeding Up Entmax* as fixed CSVs, PNGs and REPORT.md, beside the paper's numbers.

* :mod:`.study` -- the stages (prepare, tau, train, the tau sweep) and the study's contract;
  :mod:`.steps` -- the analyses after training; :mod:`.grid` -- where each (transform, seed)
  cell lives;
* :mod:`.columns` -- the catalog: every CSV's name, the paper item it redraws, its columns;
* :mod:`.paper` -- the paper's printed numbers and tolerances;
* :mod:`.layout` -- run folders per cell; :mod:`.runs` -- run folders -> training dynamics,
  tau/||z||, training time and the tau sweep; :mod:`.provenance` -- which runs a report uses;
* :mod:`.tables`, :mod:`.distributions`, :mod:`.examples`, :mod:`.alpha_relu_graph`,
  :mod:`.human_eval` -- the rows of each measured table and figure;
* :mod:`.build` -- the tables a report computes; :mod:`.seed_summary` -- every CSV over seeds;
* :mod:`.compare_tables`, :mod:`.compare_figures`, :mod:`.quality`,
  :mod:`.reproduction_report` -- the claims and REPORT.md; :mod:`.plots` -- the figures.
"""
