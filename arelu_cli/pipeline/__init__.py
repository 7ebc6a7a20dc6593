"""The multi-step commands: ``arelu reproduce`` (the paper's grid, :mod:`.reproduce`,
:mod:`.reproduce_steps`, :mod:`.grid`) and ``arelu study`` (:mod:`.study`, :mod:`.sweep`,
:mod:`.study_runs`, :mod:`.study_report`). Resumable: every step is skipped when its outputs
are up to date. Uses everything below it; only the CLI imports it."""
