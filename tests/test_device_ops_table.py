"""Every op of the op table (tests/test_ops_table.py) with every tensor on the CUDA device.

On a machine without a GPU the device is the simulated array library
(varlens/core/simulated_cuda.py): an op that computes with NumPy where its inputs live on the
device, mixes in a host array, or reads a value on the host inside forward/backward fails here.
Values and gradients are compared with PyTorch (CPU, float64), and outputs and gradients must
stay on the device.  float32 runs too (looser tolerance): the dtype must be kept on the device.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

import varlens as vl
from conftest import assert_close
from test_ops_table import OPS_BY_NAME, _inputs, _outs, _torch_inputs, cases

# Ops whose result's size depends on the values: the forward must read the device (as on a real
# GPU: torch syncs for x[mask] too); their backward still must not.
SIZE_FROM_VALUES = {"bool_mask"}

SETTINGS = settings(max_examples=4, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def _device_inputs(arrays, dtype):
    out = []
    for a in arrays:
        if a.dtype == np.float64:
            out.append(vl.tensor(a.astype(dtype)).cuda().requires_grad_(True))
        else:
            out.append(vl.tensor(a).cuda())
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(OPS_BY_NAME))
def test_op_on_device_matches_torch(name, dtype, sim_cuda):
    op = OPS_BY_NAME[name]
    tol = dict(rtol=1e-7, atol=max(op.atol, 1e-9)) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-4)

    @SETTINGS
    @given(cases(op))
    def run(case):
        arrays, kw = _inputs(op, *case)
        vs, ts = _device_inputs(arrays, dtype), _torch_inputs(arrays)
        if name in SIZE_FROM_VALUES:
            before = sim_cuda.host_syncs[0]
            vo = _outs(op.vfn(*vs, **kw))
            assert sim_cuda.host_syncs[0] - before <= 1, f"{name}: more than the one inherent host read"
        else:
            with sim_cuda.forbid_host_sync():
                vo = _outs(op.vfn(*vs, **kw))
        to = _outs(op.tfn(*ts, **kw))
        assert len(vo) == len(to)
        rng = np.random.default_rng(1)
        vloss, tloss = 0.0, 0.0
        for a, b in zip(vo, to):
            assert a.is_cuda, f"{name}: an output came back on {a.device}"
            if b.dtype.is_floating_point:
                assert a.dtype == dtype, f"{name}: dtype {a.dtype} on the device, expected {np.dtype(dtype)}"
            assert_close(a, b, what=f"{name} value {case}", **tol)
            w = rng.standard_normal(tuple(b.shape))
            if a.dtype.kind == "f":
                vloss = vloss + (a * vl.tensor(w.astype(dtype)).cuda()).sum()
                tloss = tloss + (b * torch.tensor(w)).sum()
        if not isinstance(vloss, vl.Tensor) or not vloss.requires_grad:
            return
        with sim_cuda.forbid_host_sync():
            vloss.backward()
        tloss.backward()
        for i, (v, t) in enumerate(zip(vs, ts)):
            if t.requires_grad:
                tg = t.grad if t.grad is not None else torch.zeros_like(t)
                assert v.grad is not None, f"{name}: input {i} got no gradient"
                assert v.grad.is_cuda, f"{name}: the gradient of input {i} is on {v.grad.device}"
                assert_close(v.grad, tg, what=f"{name} grad of input {i} {case}", **tol)
    run()
