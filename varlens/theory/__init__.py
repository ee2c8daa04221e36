"""varlens.theory: the closed-form claims of the notes, each with a Monte Carlo (or exact) check.

``varlens check`` runs them all; ``run_claims()`` returns the rows.  Each topic
module registers its claims in :data:`REGISTRY` on import.
"""
from varlens.theory.registry import REGISTRY, CheckResult, Claim, claim, run_claims  # noqa: F401
from varlens.theory import activations, batch, dropout, init, norm, optim, variance  # noqa: F401,E402
from varlens.theory import info_stats  # noqa: F401,E402  (the claims of varlens.info / varlens.stats)
