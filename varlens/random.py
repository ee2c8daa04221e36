"""Random number generation: a seeded global generator and explicit Generator objects.

varlens draws from NumPy's PCG64, so the same seed gives the same numbers in
varlens on every machine, but not the numbers PyTorch would draw (its
generator is Mersenne Twister / Philox).  Parity tests copy weights instead.
"""
from __future__ import annotations

import numpy as np


class Generator:
    """An explicit random stream (``varlens.Generator().manual_seed(0)``)."""

    def __init__(self, device="cpu"):
        self._seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
        self._seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self):
        return self.manual_seed(int(np.random.SeedSequence().entropy % (2 ** 63)))

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The full stream state as a JSON-safe dict (for checkpoints)."""
        return {"seed": self._seed, "bit_generator": self.rng.bit_generator.state}

    def set_state(self, state):
        self._seed = state["seed"]
        self.rng.bit_generator.state = state["bit_generator"]
        return self

    # NumPy-like draws used across varlens
    def normal(self, loc, scale, size):
        return self.rng.normal(loc, scale, size)

    def uniform(self, lo, hi, size):
        return self.rng.uniform(lo, hi, size)

    def random(self, size):
        return self.rng.random(size)

    def integers(self, lo, hi, size):
        return self.rng.integers(lo, hi, size)

    def permutation(self, n):
        return self.rng.permutation(n)


default_generator = Generator().manual_seed(0)


def manual_seed(seed):
    """Seed the global generator (and NumPy's legacy global one, for user code that uses it)."""
    default_generator.manual_seed(seed)
    np.random.seed(int(seed) % (2 ** 32))
    return default_generator


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def _gen(generator):
    return default_generator if generator is None else generator


_device_generators = {}   # array library -> its default Generator (one per device library)


def generator_for(xp, generator=None):
    """The random stream for arrays of library ``xp`` (NumPy, or the CUDA device's): the
    ``generator`` given, or that device's default one.  Its ``rng`` draws arrays in ``xp``
    (``random``, ``standard_normal``, ``normal``, ``uniform``, ``integers``, ``permutation``)."""
    if xp is np:
        return _gen(generator)
    if generator is not None:
        return generator
    g = _device_generators.get(xp)
    if g is None:
        g = _device_generators[xp] = _DeviceGenerator(xp).manual_seed(0)
    return g


class _DeviceGenerator(Generator):
    """A Generator whose draws are made on a device by that device's library (cupy.random, or
    the simulator's), seeded separately from the CPU's (as torch's CUDA generators are)."""

    def __init__(self, xp):
        self.xp = xp
        self.manual_seed(0)

    def manual_seed(self, seed):
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
        self._seed = int(seed)
        self.rng = self.xp.random.default_rng(self._seed)
        return self

    def get_state(self):
        return {"seed": self._seed, "device": "cuda"}

    def set_state(self, state):
        return self.manual_seed(state["seed"])


def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Context manager: random draws inside it leave the global generator's state as it was
    on entry (torch.random.fork_rng; varlens has only the CPU generator to fork)."""
    import contextlib

    @contextlib.contextmanager
    def _fork():
        if not enabled:
            yield
            return
        state = get_rng_state()
        try:
            yield
        finally:
            set_rng_state(state)
    return _fork()
