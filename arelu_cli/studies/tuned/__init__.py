"""The tuned translation study (``[study] kind = "tuned"``): every transform at its
dev-selected configuration, several seeds, equal steps, equal time and convergence, paired
bootstrap. Modules: ``study`` (stages), ``runs`` (the plan's runs and step times), ``report``
(tables and REPORT.md), ``claims`` (its verdicts), ``plots``."""
