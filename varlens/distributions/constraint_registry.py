"""torch.distributions.constraint_registry: ``biject_to`` / ``transform_to`` (defined in transforms.py)."""
from varlens.distributions.transforms import ConstraintRegistry, biject_to, transform_to  # noqa: F401

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]
