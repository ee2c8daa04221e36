"""torch.utils.data._utils look-alike (scripts import default_collate and pin_memory from here)."""
from varlens.utils.data._utils import collate  # noqa: F401
from varlens.utils.data._utils import pin_memory  # noqa: F401
