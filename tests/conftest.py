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


def to_torch(t, requires_grad=None):
    """A torch tensor with the same values (float64 stays float64)."""
    a = t._data if isinstance(t, vl.Tensor) else np.asarray(t)
    tt = torch.from_numpy(np.array(a, copy=True))
    rg = t.requires_grad if requires_grad is None and isinstance(t, vl.Tensor) else bool(requires_grad)
    if rg:
        tt.requires_grad_(True)
    return tt


def assert_close(a, b, rtol=1e-7, atol=1e-9, what=""):
    """Compare a varlens tensor/array with a torch tensor/array elementwise."""
    an = a._data if isinstance(a, vl.Tensor) else (a.detach().numpy() if hasattr(a, "detach") else np.asarray(a))
    bn = b._data if isinstance(b, vl.Tensor) else (b.detach().numpy() if hasattr(b, "detach") else np.asarray(b))
    assert an.shape == bn.shape, f"{what}: shape {an.shape} != {bn.shape}"
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, err_msg=what)


@pytest.fixture(autouse=True)
def _seed():
    vl.manual_seed(0)
    torch.manual_seed(0)
    yield
