"""torch.utils.data._utils look-alike (scripts import default_collate from here)."""
from varlens.utils.data._utils import collate  # noqa: F401
