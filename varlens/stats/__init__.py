"""varlens.stats: statistical inference of seed 003 §3 (LLN/CLT, estimators, MLE, Bayes and
MAP), the kept-unit counts of dropout (seed 001 §1.3-1.5) and bagging/boosting (003 §4.5).

``CLAIMS`` lists (id, description, check) for the `varlens check` registry; ids follow the
inventory's numbering (``003-73`` is item 73 of notes-inventory-part1-background.md §14)."""
from varlens.stats import bayes, dropout_counts, ensembles, estimators, lln_clt, mle
from varlens.stats.claims import CLAIMS

__all__ = ["bayes", "dropout_counts", "ensembles", "estimators", "lln_clt", "mle", "CLAIMS"]
