"""The device core (issue 21): tensors carry a device, ops compute with their inputs' array library,
two devices in one op raise torch's error, and the simulated CUDA library keeps the GPU path honest
(NumPy refuses its arrays, host reads are counted).  Runs on the simulated device (no GPU here)."""
from __future__ import annotations

import numpy as np
import pytest

import varlens as vl
from conftest import assert_close


@pytest.mark.simulator_only
def test_simulator_refuses_numpy_math(sim_cuda):
    a = sim_cuda.sim.ones(3)
    with pytest.raises(sim_cuda.WrongArrayLibrary, match="numpy.exp"):
        np.exp(a)
    with pytest.raises(sim_cuda.WrongArrayLibrary):
        np.asarray(a)
    with pytest.raises(TypeError, match="host"):
        a + np.ones(3)
    assert (np.float32(2) * a).__class__ is sim_cuda.SimArray   # a scalar operand is fine (CuPy too)


@pytest.mark.simulator_only
def test_host_reads_are_counted_and_can_be_forbidden(sim_cuda):
    x = vl.randn(4).cuda()
    before = sim_cuda.host_syncs[0]
    x.sum().item()
    assert sim_cuda.host_syncs[0] == before + 1
    with sim_cuda.forbid_host_sync(), pytest.raises(sim_cuda.HostSyncError):
        float(x.sum())


def test_tensor_device_moves_and_gradient_comes_back(sim_cuda):
    x = vl.randn(3, 4, dtype=vl.float64, requires_grad=True)
    y = x.to("cuda")
    assert y.device == vl.device("cuda", 0) and y.is_cuda and not x.is_cuda and y.get_device() == 0
    (y * y).sum().backward()
    assert x.grad.device.type == "cpu"
    assert_close(x.grad, 2 * x.detach())
    assert y.cpu().device.type == "cpu" and y.cuda() is y


def test_two_devices_raise_torchs_error(sim_cuda):
    a, b = vl.ones(3), vl.ones(3).cuda()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a * b
    assert (b * vl.tensor(2.0)).is_cuda          # a 0-d CPU tensor goes with CUDA tensors (torch too)


def test_numpy_on_a_cuda_tensor_gives_torchs_advice(sim_cuda):
    with pytest.raises(TypeError, match=r"Use Tensor.cpu\(\) to copy the tensor to host memory first"):
        vl.ones(2).cuda().numpy()
    assert "device='cuda:0'" in repr(vl.ones(2).cuda())


def test_module_to_device_keeps_parameter_objects(sim_cuda):
    m = vl.nn.Linear(3, 2)
    w = m.weight
    opt = vl.optim.SGD(m.parameters(), lr=0.1)
    assert m.cuda() is m and m.weight is w and w.is_cuda
    assert opt.param_groups[0]["params"][0] is w
    assert vl.nn.Linear(3, 2, device="cuda").bias.is_cuda
    assert m.cpu().weight.device.type == "cpu"


def test_no_cuda_without_a_gpu_is_a_clear_error():
    from varlens.core import array as B
    if B.cuda_namespace(required=False) is not None:   # a GPU machine with CuPy: it works instead
        assert vl.ones(2).cuda().is_cuda and vl.cuda.is_available()
        return
    assert not vl.cuda.is_available()
    with pytest.raises(RuntimeError, match="varlens computes on CUDA through CuPy"):
        vl.ones(2).cuda()
