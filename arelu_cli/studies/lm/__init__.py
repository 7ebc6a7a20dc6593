"""The language-model study (``[study] kind = "lm"``): open-ended generation with sparse
output layers. Modules: ``study`` (stages), ``runs`` (its runs and the files it reads),
``bootstrap`` (the paired bootstrap over test prompts), ``report`` (tables, REPORT.md),
``claims`` (its verdicts), ``plots``, ``bench`` (``arelu bench lm-study``)."""
