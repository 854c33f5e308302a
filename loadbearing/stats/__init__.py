"""Statistics with honest intervals (the one home; :mod:`loadbearing.stats.rates`, :mod:`loadbearing.stats.bootstrap`, and
the design matrices of a fit in :mod:`loadbearing.stats.design`): every rate comes with an interval, and a rate with no
denominator is null (``None``), never 0.

    .venv/bin/python -c "from loadbearing.stats import wilson_rate, format_rate; print(format_rate(wilson_rate(14, 57)))"

The one rate type and the one formatter (every stage uses them):

* :class:`Rate` - ``k`` of ``n`` with an interval ``[lo, hi]``, the ``method`` that made it, and how many
  questions and distinct generations stand behind it. ``Rate.to_dict()`` / ``Rate.from_dict()`` for JSON.
* :func:`format_rate` - ``"72.1% [60.4, 81.3] (49/68; 23 q)"``; ``"n/a (0/0)"`` when n == 0.
* :func:`wilson_rate` - a row-level Wilson interval: only where rows are independent (one per question).
* :func:`clustered_rate` - pooled k/n with a Korn-Graubard interval (Clopper-Pearson on a design-effect-adjusted
  effective n, with Satterthwaite (Bell-McCaffrey) degrees of freedom under an exchangeable working model at
  the ANOVA intra-question correlation, :func:`cluster_df`, :func:`anova_rho`): the headline interval wherever
  a question contributes several rows.
* ``Rate.few_clusters`` - True when the interval rests on fewer than :data:`FEW_CLUSTERS` (20) questions;
  :func:`format_rate` marks such intervals with a dagger (``[8.1, 52.4]†``).

Choice of interval (by simulation, ``python bench/calibration.py --json F``): the question-clustered percentile
bootstrap covered 84% / 87% / 90% at 5 / 7 / 16 questions and 89% with rare events; the Korn-Graubard
interval below holds 95% coverage at 5, 7, 16 and 66 questions and with rare events (66 q x 2 rows, p = 2.5%).

Lower-level pieces:

* :func:`proportion_ci` - Wilson or Clopper-Pearson ("exact") interval through statsmodels.
* :func:`rate` - the legacy JSON dict ``{k, n, rate, wilson, exact, lo, hi, method}`` (readable by
  :meth:`Rate.from_dict`).
* :func:`design_effect_interval` - the vectorised Korn-Graubard interval behind :func:`clustered_rate`
  (per-question success and row counts in, ``lo, hi`` out; the calibration bench calls it directly).
* :func:`paired_difference_ci` / :func:`paired_interval` - a paired difference of two rates with a
  question-clustered MOVER interval built on the two Korn-Graubard intervals.
* :func:`cluster_bootstrap_ci` - a seeded bootstrap that resamples *questions* (clusters), for any statistic.
* :func:`cluster_sums_bootstrap` - the vectorised question bootstrap of statistics of per-question sums (the
  probes' accuracy, balanced accuracy and paired gains): one multinomial draw of resample weights
  (:func:`cluster_resample_weights`) per call.
"""
from __future__ import annotations

from loadbearing.stats.bootstrap import (
    BOOTSTRAP_NOTE,
    cluster_bootstrap_ci,
    cluster_resample_weights,
    cluster_sums_bootstrap,
    paired_difference_ci,
)
from loadbearing.stats.rates import (
    FEW_CLUSTERS,
    FEW_CLUSTERS_MARK,
    FEW_CLUSTERS_NOTE,
    METHODS,
    Rate,
    anova_deff,
    anova_rho,
    cluster_df,
    clustered_rate,
    design_effect_interval,
    format_rate,
    paired_interval,
    proportion_ci,
    rate,
    wilson_rate,
)

__all__ = [
    "BOOTSTRAP_NOTE", "FEW_CLUSTERS", "FEW_CLUSTERS_MARK", "FEW_CLUSTERS_NOTE", "METHODS", "Rate", "anova_deff",
    "anova_rho", "cluster_bootstrap_ci", "cluster_df", "cluster_resample_weights", "cluster_sums_bootstrap",
    "clustered_rate", "design_effect_interval", "format_rate", "paired_difference_ci", "paired_interval",
    "proportion_ci", "rate", "wilson_rate",
]
