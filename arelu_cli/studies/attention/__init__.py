"""The attention study (``[study] kind = "attention"``, beyond the paper): which attention
transform a sparse-output Transformer learns with. Modules: ``study`` (stages), ``variants``
(its runs), ``report`` (tables, claims, REPORT.md), ``plots``."""
