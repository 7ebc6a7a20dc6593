"""The studies: each a folder over one contract, **stages -> tables -> claims -> document**
(:mod:`.contract`), run by one runner (:mod:`.runner`: ``arelu reproduce``, ``arelu study``,
``arelu report``).

Shared by every study: :mod:`.core` (one :class:`~.core.Run`, one :class:`~.core.Task`, "is
it done?", train if needed, reuse a run only for the settings it was trained with),
:mod:`.verdict` (the one verdict rule), :mod:`.markdown` (REPORT.md's pieces), :mod:`.plots`
(what every figure shares), :mod:`.seeds` (values over seeds), :mod:`.sweep` (the tuning
sweep and its runs), :mod:`.translation` (test translations and their paired bootstrap),
:mod:`.generations` (sampled continuations, their statistics and paired bootstrap) and
:mod:`.timings` (timings measured once). One folder per study, found by its ``[study] kind``:
``paper/`` (the paper's grid), ``tuned/``, ``attention/``, ``lm/``, ``convert/``. No study
imports another.
"""
