"""Shared test helpers.

``torch`` is the reference oracle (PyTorch 2.13.0 CPU, installed by `make test`).
Use ``to_torch`` / ``assert_close`` to compare values and gradients.
"""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import varlens as vl

# One BLAS thread per test process: the suite's matrices are small, and on a 2-core machine
# (CI, or one shared with other jobs) multi-threaded BLAS on small GEMMs mostly waits.
_BLAS_LIMIT = threadpool_limits(limits=1, user_api="blas")

import torch  # noqa: E402

torch.set_num_threads(1)


def _host(a):
    """A host array with the values of a varlens tensor's array (copied back from the simulated
    device if it lives there; the copy is not counted as a host sync)."""
    from varlens.core.simulated_cuda import SimArray
    return a._a if isinstance(a, SimArray) else a


def to_torch(t, requires_grad=None):
    """A torch tensor with the same values (float64 stays float64)."""
    a = _host(t._data) if isinstance(t, vl.Tensor) else np.asarray(t)
    tt = torch.from_numpy(np.array(a, copy=True))
    rg = t.requires_grad if requires_grad is None and isinstance(t, vl.Tensor) else bool(requires_grad)
    if rg:
        tt.requires_grad_(True)
    return tt


def assert_close(a, b, rtol=1e-7, atol=1e-9, what=""):
    """Compare a varlens tensor/array with a torch tensor/array elementwise."""
    an = _host(a._data) if isinstance(a, vl.Tensor) else (a.detach().numpy() if hasattr(a, "detach") else np.asarray(_host(a)))
    bn = _host(b._data) if isinstance(b, vl.Tensor) else (b.detach().numpy() if hasattr(b, "detach") else np.asarray(_host(b)))
    assert an.shape == bn.shape, f"{what}: shape {an.shape} != {bn.shape}"
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, err_msg=what)


@pytest.fixture
def sim_cuda():
    """The simulated CUDA device (varlens/core/simulated_cuda.py) as "cuda" for one test; yields
    the simulator module (``host_syncs``, ``forbid_host_sync``).  The previous choice comes back
    afterwards, so other tests still see no CUDA."""
    from varlens.core import array as B
    from varlens.core import simulated_cuda
    prev = B._cuda[0]
    B.simulate_cuda()
    try:
        yield simulated_cuda
    finally:
        B._cuda[0] = prev


@pytest.fixture(autouse=True)
def _seed():
    vl.manual_seed(0)
    torch.manual_seed(0)
    yield
