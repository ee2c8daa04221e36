"""Random number generation: seeded default generators (one per device) and explicit Generators.

varlens draws from NumPy's PCG64 on the CPU, so the same seed gives the same numbers in
varlens on every machine, but not the numbers PyTorch would draw (its generator is Mersenne
Twister / Philox).  Parity tests copy weights instead.

On the CUDA device, draws are made there by the device's array library (CuPy's generator, or
the simulator's, core/simulated_cuda.py) through a Generator whose ``device`` is cuda:0.  As in
PyTorch, the CPU and CUDA streams are separate: ``manual_seed(s)`` seeds both, and the same
seed gives the same draws on the same device (not the same draws on the two devices).  A draw
on one device with a Generator of the other raises PyTorch's RuntimeError.
"""
from __future__ import annotations

import numpy as np

from varlens.core.arg_rules import torch_args
from varlens.core import array as B


def _check_seed(seed, where="manual_seed"):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{where}: seed must be an int, got {type(seed).__name__} ({seed!r})")
    seed = int(seed)
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise RuntimeError(f"{where}(): seed must be within the range [-0x8000_0000_0000_0000, "
                           f"0xffff_ffff_ffff_ffff], got {seed}")
    return seed % (2 ** 64)      # torch keeps a negative seed as its 64-bit two's complement


def _fresh_seed():
    return int(np.random.SeedSequence().entropy % (2 ** 63))


class _DeviceRng:
    """The draws varlens makes, on a device, from that library's ``default_rng`` (CuPy's
    Generator or the simulator's).  CuPy's Generator offers ``random``, ``standard_normal`` (both
    float32/float64) and ``integers`` since v9, but no ``normal`` or ``permutation`` (v13) and
    ``uniform`` only since v12; so ``normal``, ``uniform`` and ``permutation`` are built from the
    first three here, on the device, and no draw goes through the host.  (The Generator, not the
    legacy RandomState, because its cuRAND states are a device array that checkpoints can hold.)"""

    def __init__(self, xp, seed):
        self.xp = xp
        self._g = xp.random.default_rng(seed)

    def random(self, size=None, dtype=np.float64):
        return self._g.random(size, dtype=dtype)

    def standard_normal(self, size=None, dtype=np.float64):
        return self._g.standard_normal(size, dtype=dtype)

    def normal(self, loc=0.0, scale=1.0, size=None):
        return self._g.standard_normal(size) * scale + loc

    def uniform(self, low=0.0, high=1.0, size=None):
        return self._g.random(size) * (high - low) + low

    def integers(self, low, high=None, size=None, dtype=np.int64):
        return self._g.integers(low, high, size, dtype=dtype)

    def permutation(self, n):
        return self.xp.argsort(self._g.random(int(n)))

    def __getattr__(self, name):        # the library's other distributions (poisson, binomial, ...)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._g, name)

    # the state, exactly: the simulator's stream is NumPy's (its bit generator's state dict); CuPy
    # keeps its generator's per-thread cuRAND states in a device array (bit_generator._state),
    # copied to the host here (a NumPy int8 array, which varlens.save stores)
    def get_state(self):
        inner = getattr(self._g, "_g", None)
        if inner is not None:
            return inner.bit_generator.state
        st = getattr(getattr(self._g, "bit_generator", None), "_state", None)
        return None if st is None else self.xp.asnumpy(st)

    def set_state(self, state):
        if state is None:
            return
        inner = getattr(self._g, "_g", None)
        if inner is not None:
            inner.bit_generator.state = state
            return
        st = self._g.bit_generator._state
        if tuple(getattr(state, "shape", ())) != tuple(st.shape):
            raise RuntimeError(f"set_rng_state: the CUDA generator state holds {tuple(st.shape)} bytes, the "
                               f"state given {tuple(getattr(state, 'shape', ()))} (saved on another GPU model?)")
        st[...] = self.xp.asarray(state)


class Generator:
    """A random stream (torch.Generator): ``varlens.Generator().manual_seed(0)`` on the CPU,
    ``varlens.Generator(device="cuda")`` on the CUDA device (an error when there is none, as
    torch).  ``rng`` makes the arrays: NumPy's Generator on the CPU, the device library's
    draws on CUDA (``random``, ``standard_normal``, ``normal``, ``uniform``, ``integers``,
    ``permutation``)."""

    def __init__(self, device="cpu"):
        from varlens.core.tensor import device as _device
        self.xp = B.namespace_of_device("cpu" if device is None else device)   # raises without CUDA
        self.device = _device("cpu") if self.xp is np else _device("cuda", 0)
        self.manual_seed(_fresh_seed())

    def manual_seed(self, seed):
        self._seed = _check_seed(seed, "Generator.manual_seed")
        if self.xp is np:
            self.rng = np.random.Generator(np.random.PCG64(self._seed))
        else:
            self.rng = _DeviceRng(self.xp, self._seed)
        return self

    def seed(self):
        """Seed from fresh entropy; returns the seed (as torch.Generator.seed)."""
        self.manual_seed(_fresh_seed())
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The full stream state as a dict (for checkpoints; varlens.save stores it): on the CPU and the
        simulated device JSON-safe numbers, on CuPy the cuRAND states copied to a host array."""
        if self.xp is np:
            return {"seed": self._seed, "bit_generator": self.rng.bit_generator.state}
        return {"seed": self._seed, "device": "cuda", "bit_generator": self.rng.get_state()}

    def set_state(self, state):
        if not isinstance(state, dict) or "seed" not in state:
            raise TypeError(f"set_state: expected a state from get_state() (a dict with 'seed'), got "
                            f"{type(state).__name__}")
        on_cuda = state.get("device") == "cuda"
        if on_cuda != (self.xp is not np):
            raise RuntimeError(f"set_state: the state is of a {'cuda' if on_cuda else 'cpu'} generator, but this "
                               f"generator is on {self.device}")
        self.manual_seed(state["seed"])
        if self.xp is np:
            self.rng.bit_generator.state = state["bit_generator"]
        else:
            self.rng.set_state(state.get("bit_generator"))
        return self

    def __repr__(self):
        return f"<varlens.Generator device={self.device} initial_seed={self._seed}>"

    # the draws used across varlens (arrays of this generator's device)
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

_device_generators = {}   # CUDA array library -> its default Generator (torch.cuda.default_generators[0])
_cuda_seed = [0]          # the seed the CUDA generator starts from (0, as the CPU one; manual_seed changes it)


def cuda_default_generator(xp=None):
    """The CUDA device's default Generator (made, seeded, on first use); an error without CUDA."""
    if xp is None:
        xp = B.cuda_namespace()
    g = _device_generators.get(xp)
    if g is None:
        g = Generator.__new__(Generator)
        g.xp = xp
        from varlens.core.tensor import device as _device
        g.device = _device("cuda", 0)
        g.manual_seed(_cuda_seed[0])
        _device_generators[xp] = g
    return g


def manual_seed_cuda(seed):
    """Seed the CUDA default generator (torch.cuda.manual_seed): kept for the device's first use when
    its generator does not exist yet, a no-op when there is no CUDA (as torch's lazy seeding)."""
    seed = _check_seed(seed)
    _cuda_seed[0] = seed
    for g in _device_generators.values():
        g.manual_seed(seed)


@torch_args(wrap=False)
def manual_seed(seed):
    """Seed the CPU generator and the CUDA one (torch.manual_seed), and NumPy's legacy global one
    (for user code that uses it).  Returns the CPU generator."""
    seed = _check_seed(seed)
    default_generator.manual_seed(seed)
    manual_seed_cuda(seed)
    np.random.seed(seed % (2 ** 32))
    return default_generator


@torch_args(wrap=False)
def seed():
    """Seed the CPU generator (and the CUDA one, as torch.seed does) from fresh entropy; returns it."""
    s = default_generator.seed()
    manual_seed_cuda(s)
    return s


@torch_args(wrap=False)
def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def _wrong_device(want, g):
    return RuntimeError(f"Expected a '{want}' device type for generator but found '{g.device.type}'")


def _gen(generator):
    """The CPU generator to draw with: ``generator`` (a CPU one) or the default."""
    if generator is None:
        return default_generator
    if getattr(generator, "xp", np) is not np:
        raise _wrong_device("cpu", generator)
    return generator


def generator_for(xp, generator=None):
    """The random stream for arrays of library ``xp`` (NumPy, or the CUDA device's): the
    ``generator`` given (it must be of that device, or torch's RuntimeError is raised), or that
    device's default one.  Its ``rng`` draws arrays in ``xp`` (``random``, ``standard_normal``,
    ``normal``, ``uniform``, ``integers``, ``permutation``)."""
    if xp is np:
        return _gen(generator)
    if generator is None:
        return _device_generators.get(xp) or cuda_default_generator(xp)
    if getattr(generator, "xp", np) is not xp:
        raise _wrong_device("cuda", generator)
    return generator


def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Context manager: random draws inside it leave the generators' states as they were on entry
    (torch.random.fork_rng): the CPU generator's, and the CUDA one's when it exists and
    ``devices`` is not an empty list."""
    import contextlib

    @contextlib.contextmanager
    def _fork():
        if not enabled:
            yield
            return
        state = get_rng_state()
        cuda = [] if devices is not None and not list(devices) else list(_device_generators.values())
        cuda_states = [g.get_state() for g in cuda]
        try:
            yield
        finally:
            set_rng_state(state)
            for g, s in zip(cuda, cuda_states):
                g.set_state(s)
    return _fork()
