"""Shared test helpers.

``torch`` is the reference oracle (PyTorch 2.13.0 CPU, installed by `make test`).
Use ``to_torch`` / ``assert_close`` to compare values and gradients.
"""
import os

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import varlens as vl

# One BLAS thread per test process: the suite's matrices are small, and on a 2-core machine
# (CI, or one shared with other jobs) multi-threaded BLAS on small GEMMs mostly waits.
_BLAS_LIMIT = threadpool_limits(limits=1, user_api="blas")

import torch  # noqa: E402

torch.set_num_threads(1)

# `make test-gpu`: the device suites on a real GPU through CuPy (the sim_cuda fixture below), and,
# when this PyTorch build has CUDA, PyTorch's side of every comparison on CUDA too (tensors made by
# torch.tensor(...) and to_torch(...) land there).
REAL_CUDA = os.environ.get("VARLENS_TEST_REAL_CUDA", "") == "1"
if REAL_CUDA and torch.cuda.is_available():
    torch.set_default_device("cuda")


def _host(a):
    """A host array with the values of a varlens tensor's array (copied back from the simulated
    device if it lives there; the copy is not counted as a host sync)."""
    from varlens.core.simulated_cuda import SimArray
    if isinstance(a, SimArray):
        return a._a
    if REAL_CUDA and type(a).__module__.startswith("cupy"):
        return a.get()               # a CuPy array (make test-gpu)
    return a


def to_torch(t, requires_grad=None):
    """A torch tensor with the same values (float64 stays float64)."""
    a = _host(t._data) if isinstance(t, vl.Tensor) else np.asarray(t)
    tt = torch.from_numpy(np.array(a, copy=True))
    if REAL_CUDA:
        tt = tt.to(torch.get_default_device())
    rg = t.requires_grad if requires_grad is None and isinstance(t, vl.Tensor) else bool(requires_grad)
    if rg:
        tt.requires_grad_(True)
    return tt


def assert_close(a, b, rtol=1e-7, atol=1e-9, what=""):
    """Compare a varlens tensor/array with a torch tensor/array elementwise."""
    an = _host(a._data) if isinstance(a, vl.Tensor) else (a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(_host(a)))
    bn = _host(b._data) if isinstance(b, vl.Tensor) else (b.detach().cpu().numpy() if hasattr(b, "detach") else np.asarray(_host(b)))
    assert an.shape == bn.shape, f"{what}: shape {an.shape} != {bn.shape}"
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, err_msg=what)


def pytest_configure(config):
    config.addinivalue_line("markers", "simulator_only: checks a property of the simulated CUDA library "
                            "(host-read counts, refused NumPy calls); left out, and listed as deselected, "
                            "when the suites run on a real GPU (VARLENS_TEST_REAL_CUDA=1)")


def pytest_collection_modifyitems(config, items):
    if not REAL_CUDA:
        return
    gone = [it for it in items if it.get_closest_marker("simulator_only")]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [it for it in items if not it.get_closest_marker("simulator_only")]


@pytest.fixture
def sim_cuda():
    """The simulated CUDA device (varlens/core/simulated_cuda.py) as "cuda" for one test; yields
    the simulator module (``host_syncs``, ``forbid_host_sync``).  The previous choice comes back
    afterwards, so other tests still see no CUDA.

    With VARLENS_TEST_REAL_CUDA=1 (``make test-gpu``, on a machine with a GPU) "cuda" is the real
    device through CuPy instead, and the simulator stays off: the fixture yields ``_real_cuda``,
    whose ``forbid_host_sync`` does nothing (host reads are counted by the simulator only)."""
    from varlens.core import array as B
    from varlens.core import simulated_cuda
    prev = B._cuda[0]
    if REAL_CUDA:
        B.simulate_cuda(False)           # forget any earlier choice: probe CuPy
        lib = B.cuda_namespace()         # raises with the reason when CuPy or the GPU is missing
        assert not getattr(lib, "simulated", False), \
            "VARLENS_TEST_REAL_CUDA=1 but 'cuda' is the simulator: unset VARLENS_SIMULATED_CUDA"
        try:
            yield _real_cuda(lib, simulated_cuda)
        finally:
            B._cuda[0] = prev
        return
    B.simulate_cuda()
    try:
        yield simulated_cuda
    finally:
        B._cuda[0] = prev


def _real_cuda(cupy, simulated_cuda):
    """What ``sim_cuda`` yields on a real GPU: the simulator module's names, with CuPy as the
    array library and host-sync checks switched off."""
    import contextlib
    import types
    return types.SimpleNamespace(
        real=True, sim=cupy, SimArray=cupy.ndarray, host_syncs=[0],
        forbid_host_sync=contextlib.nullcontext,
        HostSyncError=simulated_cuda.HostSyncError, WrongArrayLibrary=simulated_cuda.WrongArrayLibrary)


@pytest.fixture(autouse=True)
def _seed():
    vl.manual_seed(0)
    torch.manual_seed(0)
    yield
