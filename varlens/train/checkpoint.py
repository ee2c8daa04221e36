"""Training checkpoints: the safe, atomic, checksummed format of varlens.serialization
(model, optimiser, schedule, step, data order and RNG state in one nested structure),
plus the global RNG state helpers a resumed run needs."""
from __future__ import annotations

import numpy as np

from varlens.serialization import (_HEADER, FORMAT, MAGIC, VERSION, CheckpointError, CheckpointNotFoundError,  # noqa: F401,E501
                                   _pack,
                                   atomic_write_bytes, load, remove_stale_temp_files, save)


def rng_state():
    """The global RNG states: varlens's generator, NumPy's legacy global one and, once a run has
    drawn on the CUDA device, that device's generator (dropout of a model on the device)."""
    import varlens
    from varlens import random as _random
    out = {"varlens": varlens.get_rng_state(), "numpy": np.random.get_state(legacy=True)}
    gens = list(_random._device_generators.values())
    if gens:
        out["cuda"] = gens[0].get_state()
    return out


def set_rng_state(state):
    """Restore ``rng_state()``; a saved CUDA generator state is restored when this process has a
    CUDA device (a run resumed on the CPU has no use for it)."""
    import varlens
    from varlens import random as _random
    from varlens.core import array as B
    varlens.set_rng_state(state["varlens"])
    np.random.set_state(state["numpy"])
    cuda = state.get("cuda")
    if cuda is not None:
        lib = B.cuda_namespace(required=False)
        if lib is not None:
            _random.cuda_default_generator(lib).set_state(cuda)


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
