"""One experiment core and the studies planned over it.

The core: :mod:`.core` (a :class:`~.core.Run`, "is it done?", train if needed, the plan's
outputs made when missing or stale), :mod:`.reuse` (a run reused only for the settings it
was trained with), :mod:`.scoring` (test translations and the one paired bootstrap over
seeds). The plans: ``arelu reproduce`` (the paper's grid: :mod:`.reproduce`,
:mod:`.reproduce_steps`, :mod:`.grid`), ``arelu study`` (:mod:`.study`, :mod:`.sweep`,
:mod:`.study_runs`, :mod:`.study_report`, :mod:`.study_claims`) and ``arelu
attention-study`` (:mod:`.attention_study`, :mod:`.attention_report`). Resumable: every
step is skipped when its outputs are up to date. Uses everything below it; only the CLI
imports it."""
