"""The device API surface (issue 21): creation and random ops with device=, per-device generators,
varlens.cuda / varlens.accelerator, checkpoints across devices (map_location), pinned DataLoader
batches.  Run on the simulated CUDA device (the ``sim_cuda`` fixture); the ``no_cuda`` fixture
checks the answers of a machine without CUDA, against a CPU-only PyTorch where it has them."""
import io

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.core import array as B
from varlens.serialization import CheckpointError

from conftest import _host, assert_close, to_torch

# the libraries whose no-CUDA answers are compared: varlens, and PyTorch when its build has no CUDA
# (on a GPU machine with a CUDA build of PyTorch, `make test-gpu`, only varlens's side is checked)
NO_CUDA_LIBS = (vl,) if torch.cuda.is_available() else (vl, torch)


@pytest.fixture
def no_cuda():
    """No CUDA device for one test (as on a machine without CuPy), the previous choice restored."""
    prev = B._cuda[0]
    B._cuda[0] = False
    try:
        yield
    finally:
        B._cuda[0] = prev


def on_cuda(t):
    assert isinstance(t, vl.Tensor) and t.is_cuda and str(t.device) == "cuda:0" and B.is_device_array(t._data)
    return t


# ---------------------------------------------------------------- creation with device=
DETERMINISTIC = {
    "zeros": lambda m, d: m.zeros(2, 3, device=d),
    "zeros_f64": lambda m, d: m.zeros((2,), dtype=m.float64, device=d),
    "ones": lambda m, d: m.ones(4, device=d),
    "full": lambda m, d: m.full((2, 2), 7.5, device=d),
    "full_int": lambda m, d: m.full((3,), 4, device=d),
    "arange": lambda m, d: m.arange(5, device=d),
    "arange_float": lambda m, d: m.arange(0.0, 1.0, 0.25, device=d),
    "linspace": lambda m, d: m.linspace(-1, 1, 7, device=d),
    "logspace": lambda m, d: m.logspace(0, 2, 5, device=d),
    "logspace_base2": lambda m, d: m.logspace(0, 3, 4, base=2.0, dtype=m.float64, device=d),
    "eye": lambda m, d: m.eye(3, device=d),
    "eye_rect": lambda m, d: m.eye(2, 4, dtype=m.float64, device=d),
    "tensor": lambda m, d: m.tensor([[1.0, 2.0], [3.0, 4.0]], device=d),
    "as_tensor": lambda m, d: m.as_tensor([1, 2, 3], device=d),
    "as_tensor_np": lambda m, d: m.as_tensor(np.arange(4.0), device=d),
    "scalar_tensor": lambda m, d: m.scalar_tensor(2.5, device=d),
    "hann_window": lambda m, d: m.hann_window(8, device=d),
    "hamming_window": lambda m, d: m.hamming_window(6, periodic=False, device=d),
    "blackman_window": lambda m, d: m.blackman_window(5, device=d),
    "bartlett_window": lambda m, d: m.bartlett_window(7, device=d),
    "kaiser_window": lambda m, d: m.kaiser_window(6, device=d),
}


@pytest.mark.parametrize("name", sorted(DETERMINISTIC))
def test_creation_makes_its_array_on_the_device_with_torchs_values(sim_cuda, name):
    make = DETERMINISTIC[name]
    with sim_cuda.forbid_host_sync():          # made on the device: nothing is read back
        x = on_cuda(make(vl, "cuda"))
    ref = make(torch, "cpu")
    assert str(x.dtype).rsplit(".", 1)[-1] == str(ref.dtype).rsplit(".", 1)[-1] and tuple(x.shape) == tuple(ref.shape)
    assert_close(x, ref, rtol=1e-6, atol=1e-7, what=name)


@pytest.mark.parametrize("dev", ["cuda", "cuda:0", 0, vl.device("cuda"), torch.device("cuda", 0)])
def test_device_argument_forms(sim_cuda, dev):
    on_cuda(vl.zeros(2, device=dev))
    on_cuda(vl.randn(2, device=dev))


def test_like_functions_keep_the_input_device_unless_told(sim_cuda):
    x = vl.ones(2, 3, device="cuda")
    with sim_cuda.forbid_host_sync():
        for f in (vl.zeros_like, vl.ones_like, vl.empty_like, vl.randn_like, vl.rand_like):
            assert on_cuda(f(x)).shape == (2, 3)
        assert on_cuda(vl.full_like(x, 3.0)).dtype == vl.float32
        on_cuda(vl.randint_like(x, 5))
        on_cuda(x.new_zeros(2))
    for f in (vl.zeros_like, vl.ones_like, vl.empty_like, vl.randn_like, vl.rand_like):
        assert f(x, device="cpu").device == vl.device("cpu")
        on_cuda(f(vl.ones(2), device="cuda"))
    assert vl.full_like(x, 2, device="cpu").tolist() == [[2.0] * 3] * 2
    assert vl.randint_like(x, 3, device="cpu").device.type == "cpu"


def test_from_numpy_stays_on_the_cpu_and_shares_memory(sim_cuda):
    a = np.arange(3.0)
    t = vl.from_numpy(a)
    assert t.device.type == "cpu" and t._data is a
    u = vl.as_tensor(a, device="cuda")
    on_cuda(u)
    a[0] = 9.0
    assert u.cpu().tolist() == [0.0, 1.0, 2.0]           # a copy on the device
    assert vl.as_tensor(u) is u and vl.as_tensor(u, device="cuda") is u
    assert vl.as_tensor(u, device="cpu").device.type == "cpu"


def test_legacy_constructors_and_their_cuda_spellings(sim_cuda):
    t = on_cuda(vl.cuda.FloatTensor(2, 3))
    assert t.dtype == vl.float32 and isinstance(t, vl.cuda.FloatTensor) and not isinstance(t, vl.FloatTensor)
    assert vl.cuda.LongTensor([1, 2]).cpu().tolist() == [1, 2] and isinstance(vl.ones(2), vl.FloatTensor)
    assert not isinstance(vl.ones(2), vl.cuda.FloatTensor) and not isinstance(torch.ones(2), torch.cuda.FloatTensor)
    for lib in (vl, torch):
        with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu but device type: cuda"):
            lib.FloatTensor(2, device="cuda")


def test_cuda_legacy_constructors_without_cuda(no_cuda):
    for lib in NO_CUDA_LIBS:
        with pytest.raises(TypeError, match="type torch.cuda.FloatTensor not available"):
            lib.cuda.FloatTensor(2)


def test_creation_without_cuda_raises_torchs_error(no_cuda):
    for f in (lambda: vl.zeros(2, device="cuda"), lambda: vl.randn(2, device="cuda"),
              lambda: vl.arange(3, device="cuda"), lambda: vl.zeros_like(vl.ones(2), device="cuda")):
        with pytest.raises(RuntimeError, match="'cuda' is not available") as e:
            f()
        assert isinstance(e.value, AssertionError)          # torch raises AssertionError here
    if torch in NO_CUDA_LIBS:
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            torch.zeros(2, device="cuda")


# ---------------------------------------------------------------- random draws on the device
RANDOM = {
    "rand": lambda d, g=None: vl.rand(50, device=d, generator=g),
    "randn": lambda d, g=None: vl.randn(5, 4, device=d, generator=g),
    "randn_f64": lambda d, g=None: vl.randn(6, dtype=vl.float64, device=d, generator=g),
    "randint": lambda d, g=None: vl.randint(3, 9, (40,), device=d, generator=g),
    "randperm": lambda d, g=None: vl.randperm(12, device=d, generator=g),
    "normal": lambda d, g=None: vl.normal(2.0, 0.5, (30,), device=d, generator=g),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_draws_are_made_on_the_device_and_reproducible(sim_cuda, name):
    draw = RANDOM[name]
    vl.manual_seed(7)
    with sim_cuda.forbid_host_sync():
        a = on_cuda(draw("cuda"))
        a2 = on_cuda(draw("cuda"))
    vl.manual_seed(7)
    b = on_cuda(draw("cuda"))
    assert np.array_equal(_host(a._data), _host(b._data))          # same seed, same device: same draws
    assert not np.array_equal(_host(a._data), _host(a2._data))     # the stream moves on
    vl.manual_seed(7)
    c = draw("cpu")
    assert c.device.type == "cpu" and c.dtype == a.dtype and c.shape == a.shape
    g1, g2 = vl.Generator(device="cuda").manual_seed(3), vl.Generator(device="cuda").manual_seed(3)
    assert np.array_equal(_host(draw("cuda", g1)._data), _host(draw("cuda", g2)._data))


def test_random_values_have_their_distributions(sim_cuda):
    vl.manual_seed(0)
    r = vl.rand(4000, device="cuda").cpu().numpy()
    assert r.min() >= 0 and r.max() < 1 and abs(r.mean() - 0.5) < 0.03
    n = vl.normal(2.0, 0.5, (4000,), device="cuda").cpu().numpy()
    assert abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    i = vl.randint(3, 9, (2000,), device="cuda").cpu().numpy()
    assert set(np.unique(i)) == set(range(3, 9)) and i.dtype == np.int64
    assert sorted(vl.randperm(12, device="cuda").cpu().tolist()) == list(range(12))
    mt = vl.normal(vl.full((3000,), -1.0, device="cuda"), vl.full((3000,), 2.0, device="cuda"))
    assert on_cuda(mt).dtype == vl.float32 and abs(float(mt.mean()) + 1) < 0.15
    p = vl.tensor([0.0, 1.0, 0.5], device="cuda").expand(2000, 3)
    b = on_cuda(vl.bernoulli(p)).cpu().numpy()
    assert (b[:, 0] == 0).all() and (b[:, 1] == 1).all() and abs(b[:, 2].mean() - 0.5) < 0.05


def test_multinomial_on_the_device(sim_cuda):
    w = vl.tensor([[0.0, 1.0, 3.0, 0.0], [2.0, 0.0, 0.0, 2.0]], device="cuda")
    with sim_cuda.forbid_host_sync():
        with_r = on_cuda(vl.multinomial(w, 500, replacement=True))
        without = on_cuda(vl.multinomial(w, 2))
    h = with_r.cpu().numpy()
    assert set(np.unique(h[0])) == {1, 2} and set(np.unique(h[1])) == {0, 3}
    assert abs((h[0] == 2).mean() - 0.75) < 0.08
    assert sorted(without.cpu().tolist()[0]) == [1, 2] and sorted(without.cpu().tolist()[1]) == [0, 3]
    assert on_cuda(vl.multinomial(vl.ones(5, device="cuda"), 3)).shape == (3,)


def test_manual_seed_seeds_cpu_and_cuda_separately(sim_cuda):
    vl.manual_seed(11)
    a_cpu, a_cuda = vl.randn(8), vl.randn(8, device="cuda")
    vl.manual_seed(11)
    vl.randn(100)                                       # CPU draws do not move the CUDA stream
    assert np.array_equal(_host(vl.randn(8, device="cuda")._data), _host(a_cuda._data))
    assert not np.array_equal(a_cpu.numpy(), a_cuda.cpu().numpy())   # two streams, as torch
    vl.manual_seed(11)
    vl.cuda.manual_seed(5)                              # only the CUDA one
    assert np.array_equal(vl.randn(8).numpy(), a_cpu.numpy())
    assert not np.array_equal(vl.randn(8, device="cuda").cpu().numpy(), a_cuda.cpu().numpy())
    vl.cuda.manual_seed_all(11)
    assert np.array_equal(vl.randn(8, device="cuda").cpu().numpy(), a_cuda.cpu().numpy())
    assert vl.cuda.initial_seed() == 11
    vl.cuda.seed()
    assert vl.cuda.initial_seed() != 11             # fresh entropy (a 1 in 2**63 chance of 11)


def test_cuda_rng_state_round_trip_and_fork_rng(sim_cuda):
    vl.manual_seed(1)
    vl.randn(3, device="cuda")
    state = vl.cuda.get_rng_state()
    a = vl.randn(5, device="cuda").cpu().numpy()
    vl.cuda.set_rng_state(state)
    assert np.array_equal(vl.randn(5, device="cuda").cpu().numpy(), a)
    assert vl.cuda.get_rng_state_all()[0]["device"] == "cuda"
    with vl.random.fork_rng():
        vl.randn(4, device="cuda")
        vl.randn(4)
    b_cuda, b_cpu = vl.randn(3, device="cuda").cpu().numpy(), vl.randn(3).numpy()
    vl.cuda.set_rng_state(state)
    vl.randn(5, device="cuda")
    assert np.array_equal(vl.randn(3, device="cuda").cpu().numpy(), b_cuda)
    with pytest.raises(RuntimeError, match="state is of a cpu generator"):
        vl.cuda.set_rng_state(vl.get_rng_state())
    assert b_cpu.shape == (3,)
    vl.manual_seed(2)
    c = vl.randn(4, device="cuda").cpu().numpy()
    vl.manual_seed(2)
    with vl.random.fork_rng(devices=[]):                 # no devices: only the CPU stream is restored
        vl.randn(4, device="cuda")
    assert not np.array_equal(vl.randn(4, device="cuda").cpu().numpy(), c)


def test_a_generator_of_the_other_device_raises_torchs_error(sim_cuda):
    g_cpu, g_cuda = vl.Generator(), vl.Generator(device="cuda")
    assert g_cuda.device == vl.device("cuda:0") and g_cpu.device == vl.device("cpu")
    for f in (lambda: vl.randn(2, device="cuda", generator=g_cpu), lambda: vl.rand(2, device="cuda", generator=g_cpu),
              lambda: vl.randperm(3, device="cuda", generator=g_cpu),
              lambda: vl.bernoulli(vl.ones(2, device="cuda"), generator=g_cpu)):
        with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
            f()
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        vl.randn(2, generator=g_cuda)
    assert vl.cuda.default_generators[0].device == vl.device("cuda:0")


def test_cuda_generators_without_cuda(no_cuda):
    for lib in NO_CUDA_LIBS:
        with pytest.raises(RuntimeError):
            lib.Generator(device="cuda")
        assert lib.cuda.manual_seed(3) is None                  # lazy: a no-op
    with pytest.raises(RuntimeError, match="'cuda' is not available"):
        vl.Generator(device="cuda")
    for lib in NO_CUDA_LIBS:
        with pytest.raises(AssertionError):
            lib.cuda.initial_seed()
    assert vl.cuda.default_generators == () and vl.cuda.get_rng_state_all() == []


# ---------------------------------------------------------------- varlens.cuda and varlens.accelerator
def test_cuda_queries_on_the_simulated_device(sim_cuda):
    simulated = not getattr(sim_cuda, "real", False)
    assert vl.cuda.is_available() and vl.cuda.device_count() == 1 and vl.cuda.current_device() == 0
    assert vl.cuda.is_initialized() and vl.backends.cuda.is_built()
    if simulated:
        assert vl.cuda.get_device_name() == "Simulated CUDA device (NumPy)" == vl.cuda.get_device_name(0)
        assert vl.cuda.get_device_capability() == (0, 0)
    p = vl.cuda.get_device_properties(0)
    assert p.name == vl.cuda.get_device_name() and p.total_memory > 0
    vl.cuda.set_device(0)
    vl.cuda.set_device(-1)
    with pytest.raises(RuntimeError, match="invalid device ordinal|one GPU per process"):
        vl.cuda.set_device(1)
    with vl.cuda.device(0):
        on_cuda(vl.ones(1, device="cuda"))
    vl.cuda.synchronize()
    vl.cuda.empty_cache()
    assert vl.cuda.is_bf16_supported() is False
    assert vl.device("cuda" if vl.cuda.is_available() else "cpu") == vl.device("cuda")


@pytest.mark.simulator_only
def test_memory_statistics_follow_device_arrays(sim_cuda):
    if getattr(sim_cuda, "real", False):
        pytest.skip("byte-exact figures are the simulator's; CuPy's pool rounds allocations up")
    vl.cuda.reset_peak_memory_stats()
    before = vl.cuda.memory_allocated()
    x = vl.zeros(1000, dtype=vl.float64, device="cuda")
    assert vl.cuda.memory_allocated() - before == 8000 and vl.cuda.memory_reserved() >= 8000
    del x
    assert vl.cuda.memory_allocated() == before
    assert vl.cuda.max_memory_allocated() >= before + 8000
    vl.cuda.reset_peak_memory_stats()
    assert vl.cuda.max_memory_allocated() == before
    assert vl.accelerator.memory_allocated() == before
    assert vl.accelerator.memory_stats()["allocated_bytes.all.current"] == before
    assert vl.cuda.memory_stats()["allocated_bytes.all.peak"] == before
    free, total = vl.cuda.mem_get_info()
    assert 0 <= free <= total and (free, total) == vl.accelerator.get_memory_info()
    assert "allocated_bytes.all.current" in vl.cuda.memory_summary()


def test_events_and_streams(sim_cuda):
    start, end = vl.cuda.Event(enable_timing=True), vl.cuda.Event(enable_timing=True)
    start.record()
    vl.randn(64, 64, device="cuda") @ vl.randn(64, 64, device="cuda")
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        vl.cuda.Event().elapsed_time(vl.cuda.Event())
    s = vl.cuda.Stream()
    with vl.cuda.stream(s):
        on_cuda(vl.ones(2, device="cuda") * 2)
    s.synchronize()
    assert s.query() and vl.cuda.current_stream().query()
    vl.cuda.current_stream().wait_stream(s)


def test_accelerator_is_the_cuda_device(sim_cuda):
    a = vl.accelerator
    assert a.is_available() and a.device_count() == 1 and a.current_accelerator() == vl.device("cuda")
    assert a.current_device_index() == 0
    a.synchronize()
    free, total = a.get_memory_info()
    assert 0 <= free <= total
    with a.device_index(0):
        pass


def test_without_cuda_the_answers_are_a_cpu_only_torchs(no_cuda):
    for lib in NO_CUDA_LIBS:
        assert lib.cuda.is_available() is False and lib.cuda.device_count() == 0
        assert lib.cuda.memory_allocated() == 0 and lib.cuda.max_memory_allocated() == 0
        assert lib.accelerator.is_available() is False and lib.accelerator.current_accelerator() is None
        for f in (lib.cuda.current_device, lib.cuda.get_device_name):
            with pytest.raises(AssertionError):
                f()
        assert lib.cuda.memory_stats() == {}
    vl.cuda.empty_cache()
    vl.cuda.synchronize()
    vl.cuda.reset_peak_memory_stats()
    with pytest.raises(AssertionError):
        vl.cuda.mem_get_info()
    assert vl.backends.cuda.is_built() is False and vl.cuda.is_initialized() is False
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        vl.accelerator.synchronize()


def test_simulate_is_the_public_switch():
    prev = B._cuda[0]
    try:
        lib = vl.cuda.simulate()
        assert getattr(lib, "simulated", False) and vl.cuda.is_available()
        on_cuda(vl.ones(2).cuda())
        B._cuda[0] = False
        assert not vl.cuda.is_available()
    finally:
        B._cuda[0] = prev


# ---------------------------------------------------------------- checkpoints across devices
def _trained_cuda_model():
    vl.manual_seed(0)
    m = vl.nn.Sequential(vl.nn.Linear(3, 4), vl.nn.Tanh(), vl.nn.Linear(4, 2)).cuda()
    opt = vl.optim.Adam(m.parameters(), lr=0.1)
    m(vl.randn(5, 3, device="cuda")).sum().backward()
    opt.step()
    return m, opt


def _saved(obj):
    b = io.BytesIO()
    vl.save(obj, b)
    return b.getvalue()


def test_save_cuda_state_and_load_back_to_the_device(sim_cuda):
    m, opt = _trained_cuda_model()
    raw = _saved({"model": m.state_dict(), "opt": opt.state_dict(), "t": vl.arange(3.0, device="cuda"),
                  "host": vl.ones(2)})
    ck = vl.load(io.BytesIO(raw))                       # None: back where each tensor was saved from
    for k, v in m.state_dict().items():
        on_cuda(ck["model"][k])
        assert np.array_equal(_host(ck["model"][k]._data), _host(v._data))
    assert ck["host"].device.type == "cpu" and on_cuda(ck["t"]).cpu().tolist() == [0.0, 1.0, 2.0]
    exp_avg = ck["opt"]["state"][0]["exp_avg"]
    on_cuda(exp_avg)
    m2 = vl.nn.Sequential(vl.nn.Linear(3, 4), vl.nn.Tanh(), vl.nn.Linear(4, 2)).cuda()
    opt2 = vl.optim.Adam(m2.parameters(), lr=0.1)
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    x = vl.randn(2, 3, device="cuda")
    assert np.array_equal(_host(m(x)._data), _host(m2(x)._data))


def test_a_cpu_checkpoint_resumes_training_on_the_device(sim_cuda):
    m = vl.nn.Linear(3, 2)
    opt = vl.optim.Adam(m.parameters(), lr=0.1)
    m(vl.randn(4, 3)).sum().backward()
    opt.step()
    ck = vl.load(io.BytesIO(_saved({"m": m.state_dict(), "o": opt.state_dict()})))
    m2 = vl.nn.Linear(3, 2, device="cuda")
    opt2 = vl.optim.Adam(m2.parameters(), lr=0.1)
    m2.load_state_dict(ck["m"])
    opt2.load_state_dict(ck["o"])
    on_cuda(opt2.state[m2.weight]["exp_avg"])
    x = vl.randn(4, 3)
    for model, o, xx in ((m, opt, x), (m2, opt2, x.cuda())):
        o.zero_grad()
        model(xx).sum().backward()
        o.step()
    assert_close(m2.weight.detach(), to_torch(m.weight.detach()), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("form", ["cpu", "cpu_device", "torch_cpu", "dict", "callable_cpu"])
def test_map_location_to_the_cpu(sim_cuda, form):
    m, _ = _trained_cuda_model()
    raw = _saved(m.state_dict())
    ml = {"cpu": "cpu", "cpu_device": vl.device("cpu"), "torch_cpu": torch.device("cpu"),
          "dict": {"cuda:0": "cpu"}, "callable_cpu": lambda storage, loc: storage}[form]
    sd = vl.load(io.BytesIO(raw), map_location=ml)
    for k, v in m.state_dict().items():
        assert sd[k].device.type == "cpu" and np.array_equal(sd[k].numpy(), _host(v._data))
    cpu_model = vl.nn.Sequential(vl.nn.Linear(3, 4), vl.nn.Tanh(), vl.nn.Linear(4, 2))
    cpu_model.load_state_dict(sd)
    assert cpu_model[0].weight.device.type == "cpu"


@pytest.mark.parametrize("form", ["cuda", "cuda:0", "device", "torch_device", "dict", "callable"])
def test_map_location_to_the_device(sim_cuda, form):
    m = vl.nn.Linear(3, 2)
    raw = _saved({"sd": m.state_dict(), "n": 3})
    ml = {"cuda": "cuda", "cuda:0": "cuda:0", "device": vl.device("cuda"), "torch_device": torch.device("cuda", 0),
          "dict": {"cpu": "cuda:0"}, "callable": lambda storage, loc: storage.cuda()}[form]
    ck = vl.load(io.BytesIO(raw), map_location=ml)
    assert ck["n"] == 3
    for k, v in m.state_dict().items():
        assert np.array_equal(on_cuda(ck["sd"][k]).cpu().numpy(), v.numpy())
    assert type(ck["sd"]["weight"]) is type(m.state_dict()["weight"])


def test_map_location_callable_sees_the_saved_location(sim_cuda):
    seen = []
    raw = _saved({"a": vl.ones(1, device="cuda"), "b": vl.ones(1)})
    out = vl.load(io.BytesIO(raw), map_location=lambda s, loc: seen.append(loc))
    assert sorted(seen) == ["cpu", "cuda:0"]
    on_cuda(out["a"])                                   # None from the callable: the saved device
    assert out["b"].device.type == "cpu"


def test_whole_module_on_cuda_round_trip(sim_cuda):
    m, _ = _trained_cuda_model()
    raw = _saved(m)
    back = vl.load(io.BytesIO(raw), weights_only=False)
    assert isinstance(back[0].weight, vl.nn.Parameter) and on_cuda(back[0].weight).requires_grad
    x = vl.randn(2, 3, device="cuda")
    assert np.array_equal(_host(back(x)._data), _host(m(x)._data))
    cpu = vl.load(io.BytesIO(raw), weights_only=False, map_location="cpu")
    assert cpu[0].weight.device.type == "cpu" and isinstance(cpu[0].weight, vl.nn.Parameter)


def test_load_state_dict_keeps_each_parameters_device(sim_cuda):
    src = vl.nn.Linear(3, 2)
    dst = vl.nn.Linear(3, 2, device="cuda")
    w = dst.weight
    dst.load_state_dict(src.state_dict())                     # CPU values into CUDA parameters
    assert dst.weight is w and on_cuda(dst.weight) is w
    assert np.array_equal(dst.weight.detach().cpu().numpy(), src.weight.detach().numpy())
    back = vl.nn.Linear(3, 2)
    back.load_state_dict(dst.state_dict())                    # CUDA values into CPU parameters
    assert back.weight.device.type == "cpu"
    assert np.array_equal(back.weight.detach().numpy(), src.weight.detach().numpy())


def test_loading_cuda_tensors_without_cuda_names_map_location(sim_cuda):
    raw = _saved({"w": vl.ones(2, device="cuda")})
    prev = B._cuda[0]
    B._cuda[0] = False
    try:
        with pytest.raises(RuntimeError, match="saved on a CUDA device.*map_location='cpu'"):
            vl.load(io.BytesIO(raw))
        with pytest.raises(RuntimeError, match="map_location='cuda'.*not available.*map_location='cpu'"):
            vl.load(io.BytesIO(raw), map_location="cuda")
        assert vl.load(io.BytesIO(raw), map_location="cpu")["w"].tolist() == [1.0, 1.0]
        assert vl.load(io.BytesIO(raw), map_location={"cuda:0": "cpu"})["w"].tolist() == [1.0, 1.0]
    finally:
        B._cuda[0] = prev


@pytest.mark.parametrize("dev", ["cuda:1", "cpu", "evil", "cuda:-1", 5, None, ""])
def test_array_device_tags_are_checked(sim_cuda, dev):
    from test_hostile_files import load_bounded, meta_array, npz, wrap
    body = {"__array__": "a0", "tensor": True, "device": dev}
    err = load_bounded(wrap(npz(__meta__=meta_array(body), a0=np.arange(3.0))))
    assert isinstance(err, CheckpointError) and "device" in str(err)
    ok = load_bounded(wrap(npz(__meta__=meta_array(dict(body, device="cuda:0")), a0=np.arange(3.0))))
    assert isinstance(ok, vl.Tensor) and on_cuda(ok).cpu().tolist() == [0.0, 1.0, 2.0]


# ---------------------------------------------------------------- pinned memory and the DataLoader
def test_pin_memory(sim_cuda):
    x = vl.arange(4.0)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.device.type == "cpu" and p.tolist() == x.tolist()
    assert p.pin_memory() is p
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        vl.ones(2, device="cuda").pin_memory()
    assert not vl.ones(2, device="cuda").is_pinned()


def test_dataloader_pins_batches_and_non_blocking_copies_work(sim_cuda):
    from varlens.utils.data import DataLoader, TensorDataset
    X, Y = vl.randn(10, 3), vl.arange(10)
    dl = DataLoader(TensorDataset(X, Y), batch_size=4, pin_memory=True)
    seen = []
    for xb, yb in dl:
        assert xb.is_pinned() and yb.is_pinned()
        xd, yd = xb.to("cuda", non_blocking=True), yb.cuda(non_blocking=True)
        on_cuda(xd), on_cuda(yd)
        seen.append(yd.cpu().numpy())
    assert np.array_equal(np.concatenate(seen), np.arange(10))
    d = DataLoader([{"a": vl.ones(2), "b": "s"}] * 2, batch_size=2, pin_memory=True)
    (batch,) = list(d)
    assert batch["a"].is_pinned() and batch["b"] == ["s", "s"]


def test_dataloader_pin_memory_without_cuda_changes_nothing(no_cuda):
    from varlens.utils.data import DataLoader, TensorDataset
    X = vl.randn(6, 2)
    for xb, in DataLoader(TensorDataset(X), batch_size=3, pin_memory=True):
        assert not xb.is_pinned() and xb.device.type == "cpu"
    assert vl.ones(2).pin_memory().is_pinned() is False


# ---------------------------------------------------------------- the CuPy branches, on a stand-in
class _FakeCuPy:
    """A stand-in with the parts of CuPy's API that varlens.cuda and varlens.random use where the
    simulator takes another branch (memory pool and hooks, runtime queries, the generator's
    device-side state).  It checks varlens's side of those calls on machines without a GPU;
    `make test-gpu` runs the real ones."""

    def __init__(self):
        import types
        hooks = []

        class MemoryHook:
            def __enter__(self):
                hooks.append(self)
                return self

        class Pool:
            used = 0
            freed = False

            def used_bytes(self):
                return self.used

            def total_bytes(self):
                return self.used + 512

            def free_all_blocks(self):
                self.freed = True

            def malloc(self, n):
                self.used += n
                for h in hooks:
                    h.malloc_postprocess(device_id=0, size=n, mem_size=n, mem_ptr=1, pmem_id=1)

            def free(self, n):
                self.used -= n
                for h in hooks:
                    h.free_postprocess(device_id=0, mem_size=n, mem_ptr=1, pmem_id=1)

        class Gen:
            def __init__(self, seed):
                self.bit_generator = types.SimpleNamespace(_state=np.random.default_rng(seed).integers(
                    0, 100, 48).astype(np.int8))

        self.pool, self.pinned, self.hooks = Pool(), Pool(), hooks
        self.syncs = []
        runtime = types.SimpleNamespace(
            getDeviceCount=lambda: 1, memGetInfo=lambda: (3000, 8000),
            getDeviceProperties=lambda i: {"name": b"Fake GPU", "totalGlobalMem": 8000, "major": 9, "minor": 0,
                                           "multiProcessorCount": 132})
        self.cuda = types.SimpleNamespace(MemoryHook=MemoryHook, runtime=runtime,
                                          Device=lambda i: types.SimpleNamespace(
                                              synchronize=lambda: self.syncs.append(i)))
        self.random = types.SimpleNamespace(default_rng=Gen)
        self.get_default_memory_pool = lambda: self.pool
        self.get_default_pinned_memory_pool = lambda: self.pinned
        self.asnumpy = lambda a: np.array(a, copy=True)
        self.asarray = np.asarray


@pytest.fixture
def fake_cupy():
    import varlens.random as R
    from varlens import cuda as C
    prev, prev_hook = B._cuda[0], C._PeakHook.hook
    lib = B._cuda[0] = _FakeCuPy()
    C._PeakHook.hook = None
    try:
        yield lib
    finally:
        B._cuda[0], C._PeakHook.hook = prev, prev_hook
        R._device_generators.pop(lib, None)


@pytest.mark.simulator_only
def test_cupy_branches_of_the_queries_and_memory_figures(fake_cupy):
    assert vl.cuda.get_device_name() == "Fake GPU" and vl.cuda.get_device_capability() == (9, 0)
    p = vl.cuda.get_device_properties(0)
    assert (p.total_memory, p.multi_processor_count) == (8000, 132)
    assert vl.cuda.mem_get_info() == (3000, 8000)
    vl.cuda.synchronize()
    vl.cuda.empty_cache()
    assert fake_cupy.syncs == [0] and fake_cupy.pool.freed and fake_cupy.pinned.freed
    pool = fake_cupy.pool
    pool.malloc(100)
    vl.cuda.reset_peak_memory_stats()                   # installs the peak counter (a memory hook)
    assert len(fake_cupy.hooks) == 1 and vl.cuda.max_memory_allocated() == 100
    pool.malloc(1000)
    pool.free(1000)
    assert vl.cuda.memory_allocated() == 100 and vl.cuda.max_memory_allocated() == 1100
    assert vl.cuda.memory_reserved() == 612
    vl.cuda.reset_peak_memory_stats()
    assert vl.cuda.max_memory_allocated() == 100 and len(fake_cupy.hooks) == 1


def test_cupy_branch_of_the_generator_state(fake_cupy):
    g = vl.random.cuda_default_generator(fake_cupy)
    g.rng._g.bit_generator._state[:] = 7                # draws moved the device state on from the seed's
    state = vl.cuda.get_rng_state()
    saved = state["bit_generator"].copy()
    assert state["device"] == "cuda" and saved.dtype == np.int8 and (saved == 7).all()
    g.rng._g.bit_generator._state[:] = 0                # and on again
    vl.cuda.set_rng_state(state)
    assert (g.rng._g.bit_generator._state == 7).all()   # back where it was, not at the seed's start
    with pytest.raises(RuntimeError, match="generator state holds"):
        vl.cuda.set_rng_state(dict(state, bit_generator=saved[:5]))
