"""Training checkpoints: the safe, atomic, checksummed format of varlens.serialization
(model, optimiser, schedule, step, data order and RNG state in one nested structure),
plus the global RNG state helpers a resumed run needs."""
from __future__ import annotations

import numpy as np

from varlens.serialization import (_HEADER, FORMAT, MAGIC, VERSION, CheckpointError, CheckpointNotFoundError,  # noqa: F401,E501
                                   _pack,
                                   atomic_write_bytes, load, remove_stale_temp_files, save)


def rng_state():
    """The global RNG states: varlens's generator and NumPy's legacy global one."""
    import varlens
    return {"varlens": varlens.get_rng_state(), "numpy": np.random.get_state(legacy=True)}


def set_rng_state(state):
    import varlens
    varlens.set_rng_state(state["varlens"])
    np.random.set_state(state["numpy"])


def newest_valid_checkpoint(out_dir):
    """(path, skipped) for a run folder: the newest checkpoint in ``out_dir/checkpoints`` that
    loads (None if none does), and the newer ones that did not as (path, reason) pairs."""
    from varlens.train.trainer import list_checkpoints   # trainer imports this module
    skipped = []
    for p in reversed(list_checkpoints(out_dir)):
        try:
            load(p)
        except CheckpointError as e:
            skipped.append((p, str(e)))
            continue
        return p, skipped
    return None, skipped
