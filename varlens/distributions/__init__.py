"""varlens.distributions: torch.distributions built from differentiable varlens ops.

The families, with torch's constructor arguments (``probs``/``logits`` forms included),
``validate_args`` (on by default: a bad parameter raises a ValueError naming it and the
constraint), ``batch_shape``/``event_shape``, ``sample``/``rsample``/``log_prob``/``entropy``/
``cdf``/``icdf``/``expand``, and ``mean``/``mode``/``variance``/``stddev``/``support``/
``arg_constraints``/``has_rsample``:

* continuous: Normal, LogNormal, HalfNormal, Uniform, Exponential, Laplace, Cauchy, Gamma, Chi2,
  Beta, StudentT (continuous.py); MultivariateNormal, Dirichlet and Independent (multivariate.py);
* discrete: Bernoulli, Geometric, Binomial, Poisson, Categorical, OneHotCategorical, Multinomial,
  and the relaxations RelaxedBernoulli / RelaxedOneHotCategorical (discrete.py);
* ``kl_divergence`` with ``register_kl`` (kl.py);
* ``TransformedDistribution`` and ``transforms`` (Exp, Affine, Sigmoid, Tanh, Power, Abs, Compose and
  ``.inv``); LogNormal is one, as in torch (transforms.py);
* Gumbel, Weibull, Pareto, HalfCauchy, InverseGamma, Kumaraswamy (TransformedDistributions, as
  torch's), FisherSnedecor and VonMises (continuous.py); NegativeBinomial, ContinuousBernoulli,
  OneHotCategoricalStraightThrough (discrete.py); LogisticNormal, LowRankMultivariateNormal
  (multivariate.py); MixtureSameFamily (mixture_same_family.py);
* ``biject_to`` / ``transform_to`` (constraint_registry).

Densities are written with varlens ops, so gradients flow through ``log_prob``, ``entropy``,
``rsample`` and the KL terms (the VAE's closed-form KL of seed 003 §10 is
``kl_divergence(Normal, Normal(0, 1))``).  Gamma, Chi2, Beta, Dirichlet and StudentT draws are
reparametrised through the implicit derivative of the standard Gamma sample (_gamma.py).  Draws use
the global generator (``varlens.manual_seed``) unless ``generator=`` is given: same seed, same draws
on every machine, but not PyTorch's draws.
"""
from __future__ import annotations

from varlens.distributions import constraint_registry, constraints, transforms, utils  # noqa: F401
from varlens.distributions.continuous import (Beta, Cauchy, Chi2, Exponential, FisherSnedecor, Gamma, Gumbel,
                                              HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy, Laplace,
                                              LogNormal, Normal, Pareto, StudentT, Uniform, VonMises, Weibull)
from varlens.distributions.discrete import (Bernoulli, Binomial, Categorical, ContinuousBernoulli, Geometric,
                                            Multinomial, NegativeBinomial, OneHotCategorical, OneHotCategoricalStraightThrough, Poisson,
                                            RelaxedBernoulli, RelaxedOneHotCategorical)
from varlens.distributions.distribution import Distribution
from varlens.distributions.kl import kl_divergence, register_kl
from varlens.distributions.mixture_same_family import MixtureSameFamily
from varlens.distributions.multivariate import (Dirichlet, Independent, LogisticNormal, LowRankMultivariateNormal,
                                                MultivariateNormal)
from varlens.distributions.transforms import (AbsTransform, AffineTransform, ComposeTransform,  # noqa: F401
                                              ExpTransform, IndependentTransform, LowerCholeskyTransform,
                                              PowerTransform, SigmoidTransform, SoftmaxTransform, SoftplusTransform,
                                              StickBreakingTransform, TanhTransform, Transform,
                                              TransformedDistribution, biject_to, identity_transform, transform_to)

__all__ = ["Distribution", "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical",
           "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli", "Dirichlet", "ExpTransform",
           "Exponential", "FisherSnedecor", "Gamma", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal",
           "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy", "Laplace", "LogNormal",
           "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PowerTransform", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
           "StickBreakingTransform", "StudentT", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "VonMises", "Weibull", "biject_to", "constraints", "identity_transform",
           "kl_divergence", "register_kl", "transform_to", "transforms"]
