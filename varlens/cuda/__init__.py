"""torch.cuda for varlens: the CUDA device, served by CuPy on a machine with an NVIDIA GPU, or by
the simulated array library (varlens/core/simulated_cuda.py) after ``varlens.cuda.simulate()``.

Without either, the answers are those of a PyTorch built without CUDA: ``is_available()`` is
False, ``device_count()`` 0, the memory statistics 0, ``synchronize``/``empty_cache`` do
nothing, and the calls that need a device (``current_device``, ``get_device_name``, the CUDA
generator's state, ``Event``/``Stream``) raise a RuntimeError (also an AssertionError, as torch's
"Torch not compiled with CUDA enabled") that says how to get one.  varlens drives one GPU per
process, cuda:0 (choose it with CUDA_VISIBLE_DEVICES).  docs/gpu.md is the user guide.
"""
from __future__ import annotations

import os as _os
import time as _time

from varlens.core import array as _B
from varlens.core import simulated_cuda as _sim
from varlens import random as _random

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name",
           "get_device_capability", "get_device_properties", "synchronize", "empty_cache", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "reset_max_memory_allocated", "mem_get_info", "memory_stats", "memory_summary", "Event", "Stream",
           "current_stream", "default_stream", "stream", "device", "is_bf16_supported", "is_initialized", "init",
           "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
           "get_rng_state_all", "set_rng_state_all", "default_generators", "simulate", "amp",
           "SIMULATED_DEVICE_NAME"]

SIMULATED_DEVICE_NAME = "Simulated CUDA device (NumPy)"


def simulate(on=True):
    """Make the simulated CUDA array library the "cuda" device (``on=False``: forget the choice, so
    the next use looks for CuPy again).  For teaching and tests on machines without a GPU: tensors
    on it compute with NumPy, but NumPy refuses them, host reads are counted
    (``varlens.core.simulated_cuda.host_syncs``), and mixing devices raises (docs/gpu.md).
    Returns the array library now serving "cuda" (None when there is none)."""
    _B.simulate_cuda(on)
    return _B.cuda_namespace(required=False)


def _lib():
    """The CUDA array library, or the clear DeviceUnavailableError (torch's "not compiled with CUDA")."""
    return _B.cuda_namespace()


def _simulated(lib):
    return getattr(lib, "simulated", False)


def _index(device, where):
    """The CUDA index named by ``device`` (None, an int, 'cuda', 'cuda:0' or a device object); varlens
    has cuda:0 only."""
    if device is None:
        return 0
    if isinstance(device, str):
        t, _, i = device.partition(":")
        if t != "cuda" or (i and not i.isdigit()):
            raise ValueError(f"{where}: expected a CUDA device such as 'cuda:0', got {device!r}")
        idx = int(i) if i else 0
    elif isinstance(device, int) and not isinstance(device, bool):
        idx = device
    else:
        t, idx = getattr(device, "type", None), getattr(device, "index", None)
        if t != "cuda":
            raise ValueError(f"{where}: expected a CUDA device, got {device!r}")
        idx = 0 if idx is None else idx
    n = device_count()
    if not 0 <= idx < max(n, 1):
        raise RuntimeError(f"{where}: CUDA error: invalid device ordinal (device {idx}; {n} CUDA device(s))")
    if idx != 0:
        raise RuntimeError(f"{where}: varlens drives one GPU per process (cuda:0); choose GPU {idx} with "
                           f"CUDA_VISIBLE_DEVICES={idx}")
    return idx


# ---------------------------------------------------------------- queries
def is_available():
    """True when a CUDA device can hold tensors (CuPy sees a GPU, or the simulator is on)."""
    return _B.cuda_namespace(required=False) is not None


def device_count():
    return _B.device_count()


def is_initialized():
    """True once varlens has chosen the CUDA array library and found a device."""
    return _B._cuda[0] not in (None, False)


def init():
    """Initialise CUDA (torch.cuda.init): an error when there is no device."""
    _lib()


def current_device():
    """The index of the current CUDA device (always 0: varlens drives one GPU per process)."""
    _lib()
    return 0


def set_device(device):
    """Select the CUDA device: cuda:0 (varlens drives one); a negative index is ignored, as torch."""
    idx = getattr(device, "index", device)
    if isinstance(idx, int) and idx < 0:
        return
    _lib()
    _index(device, "set_device")


class device:  # noqa: N801  (torch.cuda.device)
    """``with varlens.cuda.device(0):`` selects cuda:0 for the block (the only one varlens drives);
    -1/None is a no-op; without CUDA any real index is an error."""

    def __init__(self, device):
        idx = getattr(device, "index", device)
        self.idx = None if idx is None or (isinstance(idx, int) and idx < 0) else idx
        if self.idx is not None:
            _lib()
            _index(device, "varlens.cuda.device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def get_device_name(device=None):
    lib = _lib()
    _index(device, "get_device_name")
    if _simulated(lib):
        return SIMULATED_DEVICE_NAME
    name = lib.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None):
    """(major, minor) compute capability; (0, 0) for the simulated device (it has none)."""
    lib = _lib()
    _index(device, "get_device_capability")
    if _simulated(lib):
        return (0, 0)
    p = lib.cuda.runtime.getDeviceProperties(0)
    return (int(p["major"]), int(p["minor"]))


class _DeviceProperties:
    """What torch.cuda.get_device_properties reports: name, total_memory (bytes), major, minor,
    multi_processor_count."""

    def __init__(self, name, total_memory, major, minor, multi_processor_count):
        self.name, self.total_memory = name, total_memory
        self.major, self.minor, self.multi_processor_count = major, minor, multi_processor_count

    def __repr__(self):
        return (f"_CudaDeviceProperties(name={self.name!r}, major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2 ** 20}MB, multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    lib = _lib()
    _index(device, "get_device_properties")
    if _simulated(lib):
        try:
            mem = _os.sysconf("SC_PAGE_SIZE") * _os.sysconf("SC_PHYS_PAGES")   # it computes in host memory
        except (ValueError, OSError, AttributeError):
            mem = 0
        return _DeviceProperties(SIMULATED_DEVICE_NAME, mem, 0, 0, _os.cpu_count() or 1)
    p = lib.cuda.runtime.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return _DeviceProperties(name, int(p["totalGlobalMem"]), int(p["major"]), int(p["minor"]),
                             int(p["multiProcessorCount"]))


def is_bf16_supported(including_emulation=True):
    """False: varlens has no bfloat16 dtype (NumPy lacks one; varlens.bfloat16 refuses use)."""
    return False


# ---------------------------------------------------------------- synchronisation, memory
def synchronize(device=None):
    """Wait for the device's queued work (nothing to wait for without CUDA or on the simulator)."""
    lib = _B.cuda_namespace(required=False)
    if lib is not None and not _simulated(lib):
        _index(device, "synchronize")
        lib.cuda.Device(0).synchronize()


def empty_cache():
    """Hand the unused cached blocks of CuPy's memory pools back to the driver (nothing to free
    without CUDA or on the simulator)."""
    lib = _B.cuda_namespace(required=False)
    if lib is not None and not _simulated(lib):
        lib.get_default_memory_pool().free_all_blocks()
        lib.get_default_pinned_memory_pool().free_all_blocks()


class _PeakHook:
    """Counts the bytes CuPy's default pool hands out, from the moment it is installed, to know the
    peak (CuPy's pool keeps only the current figures).  Installed by the first call to
    reset_peak_memory_stats() or max_memory_allocated()."""

    hook = None

    @classmethod
    def install(cls, lib):
        if cls.hook is not None:
            return cls.hook
        pool = lib.get_default_memory_pool()

        class Hook(lib.cuda.MemoryHook):
            name = "varlens_peak"

            def __init__(self):
                super().__init__()
                self.now = self.peak = pool.used_bytes()

            def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
                self.now += mem_size
                if self.now > self.peak:
                    self.peak = self.now

            def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
                self.now -= mem_size

        cls.hook = Hook()
        cls.hook.__enter__()      # installed for the rest of the process (this thread)
        return cls.hook


def _memory_figure(device, what, simulated, cupy):
    """A memory statistic: 0 without CUDA, ``simulated()`` on the simulator, ``cupy(lib)`` on CuPy."""
    lib = _B.cuda_namespace(required=False)
    if lib is None:
        return 0
    _index(device, what)
    return simulated() if _simulated(lib) else cupy(lib)


def memory_allocated(device=None):
    """Bytes held by live device arrays: CuPy's default pool's used bytes; on the simulator, the
    bytes of live simulated arrays; 0 without CUDA."""
    return _memory_figure(device, "memory_allocated", lambda: _sim.allocated[0], lambda lib: lib.get_default_memory_pool().used_bytes())


def max_memory_allocated(device=None):
    """The peak of memory_allocated since the last reset_peak_memory_stats() (on CuPy: since the
    first call to either, when varlens starts counting)."""
    lib = _B.cuda_namespace(required=False)
    if lib is None:
        return 0
    _index(device, "max_memory_allocated")
    if _simulated(lib):
        return _sim.allocated[1]
    h = _PeakHook.install(lib)
    return max(h.peak, lib.get_default_memory_pool().used_bytes())


def memory_reserved(device=None):
    """Bytes the allocator holds from the driver (CuPy's pool's total); on the simulator the
    allocated bytes (it caches nothing); 0 without CUDA."""
    return _memory_figure(device, "memory_reserved", lambda: _sim.allocated[0], lambda lib: lib.get_default_memory_pool().total_bytes())


def max_memory_reserved(device=None):
    """The peak of memory_reserved where it is known: the simulator's peak; on CuPy the current
    pool total (CuPy keeps no peak of it)."""
    lib = _B.cuda_namespace(required=False)
    if lib is None:
        return 0
    if _simulated(lib):
        return _sim.allocated[1]
    return memory_reserved(device)


def reset_peak_memory_stats(device=None):
    """Start the peak figures again from the current allocation."""
    lib = _B.cuda_namespace(required=False)
    if lib is None:
        return
    _index(device, "reset_peak_memory_stats")
    if _simulated(lib):
        _sim.allocated[1] = _sim.allocated[0]
        return
    h = _PeakHook.install(lib)
    h.now = h.peak = lib.get_default_memory_pool().used_bytes()


reset_max_memory_allocated = reset_peak_memory_stats


def mem_get_info(device=None):
    """(free, total) bytes of the device: CuPy's cudaMemGetInfo; on the simulator the host memory
    get_device_properties reports, less what its arrays hold."""
    lib = _lib()
    _index(device, "mem_get_info")
    if _simulated(lib):
        total = get_device_properties(device).total_memory
        return (min(max(total - _sim.allocated[0], 0), total), total)
    free, total = lib.cuda.runtime.memGetInfo()
    return (int(free), int(total))


def memory_stats(device=None):
    """The figures varlens keeps, under torch's keys: allocated and reserved bytes, current and peak
    (empty without CUDA, as torch before CUDA is initialised)."""
    if _B.cuda_namespace(required=False) is None:
        return {}
    return {"allocated_bytes.all.current": memory_allocated(device),
            "allocated_bytes.all.peak": max_memory_allocated(device),
            "reserved_bytes.all.current": memory_reserved(device),
            "reserved_bytes.all.peak": max_memory_reserved(device)}


def memory_summary(device=None, abbreviated=False):
    """A short text table of memory_stats() (torch's is longer)."""
    st = memory_stats(device)
    if not st:
        return "No CUDA device: no memory statistics."
    rows = [f"{k:<30} {v / 2 ** 20:>12.2f} MiB" for k, v in st.items()]
    return "\n".join(["varlens CUDA memory summary (device cuda:0)"] + rows)


# ---------------------------------------------------------------- events and streams
class Event:
    """torch.cuda.Event: ``record()``, ``synchronize()``, ``query()``, ``elapsed_time(end)`` (ms).
    On CuPy a cupy.cuda.Event; on the simulator the host clock at record time (its work runs
    synchronously)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        lib = _lib()
        self.enable_timing = enable_timing
        self._sim = _simulated(lib)
        self._t = None
        self._ev = None if self._sim else lib.cuda.Event(block=blocking, disable_timing=not enable_timing,
                                                         interprocess=interprocess)

    def record(self, stream=None):
        if self._sim:
            self._t = _time.perf_counter()
        else:
            self._ev.record(None if stream is None else stream._s)

    def synchronize(self):
        if not self._sim:
            self._ev.synchronize()

    def query(self):
        return True if self._sim else self._ev.done

    def wait(self, stream=None):
        if not self._sim:
            (current_stream() if stream is None else stream)._s.wait_event(self._ev)

    def elapsed_time(self, end_event):
        """Milliseconds from this event to ``end_event`` (both recorded, created with enable_timing=True)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._sim:
            if self._t is None or end_event._t is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed time.")
            return (end_event._t - self._t) * 1000.0
        import cupy
        return cupy.cuda.get_elapsed_time(self._ev, end_event._ev)


class Stream:
    """torch.cuda.Stream: ``synchronize()``, ``query()``, ``wait_stream(other)``, ``record_event()``,
    and ``with varlens.cuda.stream(s):``.  On the simulator every stream is the one synchronous queue."""

    def __init__(self, device=None, priority=0, _wrap=None):
        lib = _lib()
        _index(device, "Stream")
        self._simulated = _simulated(lib)
        self._s = _wrap if _wrap is not None else (None if self._simulated else lib.cuda.Stream(non_blocking=True))

    def synchronize(self):
        if self._s is not None:
            self._s.synchronize()

    def query(self):
        return True if self._s is None else self._s.done

    def wait_stream(self, other):
        if self._s is not None and other._s is not None:
            self._s.wait_event(other._s.record())

    def wait_event(self, event):
        event.wait(self)

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self):
        if self._s is not None:
            self._s.__enter__()
        return self

    def __exit__(self, *exc):
        if self._s is not None:
            self._s.__exit__(*exc)
        return False


def current_stream(device=None):
    lib = _lib()
    return Stream(device, _wrap=None if _simulated(lib) else lib.cuda.get_current_stream())


def default_stream(device=None):
    lib = _lib()
    return Stream(device, _wrap=None if _simulated(lib) else lib.cuda.Stream.null)


def stream(s):
    """``with varlens.cuda.stream(s):`` runs the block's device work on stream ``s`` (None: no change)."""
    import contextlib
    return contextlib.nullcontext() if s is None else s


# ---------------------------------------------------------------- random generators
def manual_seed(seed):
    """Seed the CUDA generator (kept for the device's first use; a no-op without CUDA, as torch's lazy seeding)."""
    _random.manual_seed_cuda(seed)


manual_seed_all = manual_seed


def seed():
    """Seed the CUDA generator from fresh entropy (a no-op without CUDA)."""
    if is_available():
        _random.cuda_default_generator().seed()


seed_all = seed


def initial_seed():
    return _random.cuda_default_generator(_lib()).initial_seed()


def get_rng_state(device="cuda"):
    """The CUDA generator's state (a dict, as varlens.get_rng_state; torch gives a ByteTensor)."""
    _index(device, "get_rng_state")
    return _random.cuda_default_generator(_lib()).get_state()


def set_rng_state(new_state, device="cuda"):
    _index(device, "set_rng_state")
    _random.cuda_default_generator(_lib()).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state()] if is_available() else []


def set_rng_state_all(new_states):
    for s in new_states:
        set_rng_state(s)


class _DefaultGenerators(tuple):
    """torch.cuda.default_generators: the CUDA device's default Generator (empty without CUDA)."""


def __getattr__(name):
    if name == "default_generators":
        return _DefaultGenerators((_random.cuda_default_generator(),) if is_available() else ())
    raise AttributeError(f"module 'varlens.cuda' has no attribute {name!r}")


# torch.cuda.FloatTensor, ...: the legacy constructors of CUDA tensors (varlens/ops/creation.py)
from varlens.core.tensor import _LEGACY_TYPES as _LEGACY  # noqa: E402
from varlens.ops.creation import _legacy  # noqa: E402
FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor = (
    _legacy(_n, _LEGACY[_n], "cuda") for _n in ("FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
                                                "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"))
__all__ += list(_LEGACY)

from varlens.cuda import amp  # noqa: E402,F401  (torch.cuda.amp.autocast / GradScaler)
