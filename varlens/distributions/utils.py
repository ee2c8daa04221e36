"""torch.distributions.utils: the helpers user code imports from there."""
from varlens.distributions.distribution import (broadcast_all, clamp_probs, lazy_property,  # noqa: F401
                                                logits_to_probs, probs_to_logits)

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits"]
