"""The PyTorch surface programs touch even on a CPU (issue 18): module paths imported as modules,
device predicates, torch.accelerator, torch.cuda.amp, GradScaler on a machine without CUDA,
grad_fn printing and next_functions, the version string, lazy infinite samplers, refusals that
say why (onnx, hub, fft), jit as a no-op, and the compatibility survey itself."""
import importlib
import sys
import time
import tracemalloc
import warnings

import numpy as np
import pytest
import torch

import varlens as vl


@pytest.mark.parametrize("path", ["backends.cudnn", "backends.mps", "backends.cuda", "backends.mkldnn",
                                  "backends.opt_einsum", "backends.cpu", "backends.mkl", "backends.openmp",
                                  "cuda.amp", "accelerator", "onnx", "jit", "hub", "fft", "testing", "random",
                                  "nn.modules", "nn.modules.loss", "nn.modules.module", "nn.modules.batchnorm",
                                  "nn.modules.conv", "nn.modules.linear", "nn.modules.activation",
                                  "nn.modules.container", "nn.modules.rnn", "nn.modules.transformer"])
def test_module_paths_import_as_modules(path):
    m = importlib.import_module(f"varlens.{path}")
    assert type(m).__name__ == "module"
    torch_names = getattr(importlib.import_module(f"torch.{path}"), "__all__", None)
    if path.startswith("nn.modules.") and torch_names:
        missing = [n for n in torch_names if not hasattr(m, n) and not n.startswith("Lazy")
                   and n not in ("LinearCrossEntropyLoss", "NLLLoss2d", "Container", "CrossMapLRN2d")
                   and not n.startswith("register_module_")]   # global module hooks: not supported
        assert not missing, f"varlens.{path} lacks {missing}"


def test_backend_switches_are_settable_module_attributes():
    import varlens.backends.cudnn as cudnn
    old = cudnn.benchmark
    cudnn.benchmark = True
    assert vl.backends.cudnn.benchmark is True
    cudnn.benchmark = old
    before = (cudnn.enabled, cudnn.deterministic)      # another test may have set them: flags restores
    with cudnn.flags(enabled=False, deterministic=not before[1]):
        assert cudnn.enabled is False and cudnn.deterministic is (not before[1])
    assert (cudnn.enabled, cudnn.deterministic) == before
    assert cudnn.is_available() is torch.backends.cudnn.is_available() is False
    assert vl.backends.mps.is_available() is False and vl.backends.cuda.is_built() is False
    vl.backends.cuda.matmul.allow_tf32 = True


def test_nn_modules_paths_are_the_same_classes():
    from varlens.nn.modules.loss import _Loss, _WeightedLoss
    from varlens.nn.modules.batchnorm import _BatchNorm
    from varlens.nn.modules.module import Module
    assert Module is vl.nn.Module and issubclass(vl.nn.MSELoss, _Loss)
    assert issubclass(vl.nn.CrossEntropyLoss, _WeightedLoss) and issubclass(vl.nn.BatchNorm2d, _BatchNorm)
    assert vl.nn.modules.Linear is vl.nn.Linear and vl.nn.modules.conv.Conv2d is vl.nn.Conv2d

    class MyLoss(_Loss):   # the custom-loss pattern
        def forward(self, a, b):
            return ((a - b) ** 2).mean() if self.reduction == "mean" else ((a - b) ** 2).sum()
    assert MyLoss(reduction="sum")(vl.ones(2), vl.zeros(2)).item() == 2.0


def test_accelerator_answers_as_a_cpu_only_torch():
    for lib in (vl, torch):
        assert lib.accelerator.is_available() is False
        assert lib.accelerator.current_accelerator() is None
        assert lib.accelerator.device_count() == 0
        with pytest.raises(RuntimeError):
            lib.accelerator.current_device_index()


@pytest.mark.parametrize("name", ["is_cpu", "is_cuda", "is_xpu", "is_mps", "is_meta", "is_quantized", "is_sparse",
                                  "is_mkldnn", "is_xla", "is_ipu", "is_vulkan", "is_nested", "is_sparse_csr",
                                  "is_mtia", "is_maia"])
def test_tensor_device_predicates_match_a_cpu_tensor(name):
    assert getattr(vl.ones(2), name) == getattr(torch.ones(2), name)


def test_gradscaler_disables_itself_with_a_warning_without_cuda():
    for make in (lambda lib: lib.amp.GradScaler(), lambda lib: lib.cuda.amp.GradScaler(),
                 lambda lib: lib.amp.GradScaler("cuda", enabled=True)):
        for lib in (vl, torch):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                s = make(lib)
            assert s.is_enabled() is False
            assert any("CUDA is not available" in str(i.message) or "not available" in str(i.message) for i in w)
    assert vl.amp.GradScaler("cpu").is_enabled() is torch.amp.GradScaler("cpu").is_enabled() is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vl.amp.GradScaler(enabled=False).is_enabled() is False   # disabled on purpose: no warning
    loss = vl.tensor(2.0, requires_grad=True)
    assert vl.amp.GradScaler(enabled=False).scale(loss) is loss


def _walk(fn, depth=3):
    """(name, [(child name or None or 'AccumulateGrad', index)]) down the first edges, as a tutorial does."""
    out = []
    for _ in range(depth):
        if fn is None:
            break
        name = type(fn).__name__ if type(fn).__name__ == "AccumulateGrad" else repr(fn).split()[0].strip("<")
        kids = [(None if n is None else ("AccumulateGrad" if "AccumulateGrad" in repr(n) else
                                         repr(n).split()[0].strip("<")), i) for n, i in fn.next_functions]
        out.append((name, kids))
        fn = next((n for n, _ in fn.next_functions if n is not None), None)
    return out


def test_next_functions_are_node_index_pairs_and_leaves_are_accumulate_grad():
    x = vl.ones(2, 3, requires_grad=True)
    y = (x * 2).sum()
    (node, idx), = y.grad_fn.next_functions
    assert idx == 0 and repr(node).startswith("<MulBackward0 object at 0x")
    (leaf, i0), (none, i1) = node.next_functions if len(node.next_functions) == 2 else (node.next_functions[0], (None, 0))
    assert type(leaf).__name__ == "AccumulateGrad" and leaf.variable is x and leaf.next_functions == ()
    # an input without grad is (None, 0), as in PyTorch
    a, b = vl.ones(2, requires_grad=True), vl.ones(2)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(2)
    vf, tf = (a * b).grad_fn.next_functions, (ta * tb).grad_fn.next_functions
    assert [(type(n).__name__ if n is not None else None, i) for n, i in vf] == \
           [(type(n).__name__ if n is not None else None, i) for n, i in tf]


@pytest.mark.parametrize("expr", [
    lambda L, x, w: L.relu(x @ w).sum(),
    lambda L, x, w: L.nn.functional.linear(x, w.t(), L.zeros(2)).sum(),
    lambda L, x, w: L.tanh(x @ w).mean(),
    lambda L, x, w: L.sigmoid(x @ w).exp().log().sum(),
    lambda L, x, w: L.nn.functional.cross_entropy(x @ w, L.tensor([0, 1, 0, 1])),
    lambda L, x, w: L.nn.functional.gelu(x @ w).pow(2).sum(),
    lambda L, x, w: L.softmax(x @ w, dim=-1).amax(),
    lambda L, x, w: (x @ w).reshape(-1).mean(),
], ids=["relu_mm_sum", "linear_sum", "tanh_mean", "sigmoid_exp_log", "cross_entropy", "gelu_pow", "softmax_amax",
        "view_mean"])
def test_grad_fn_names_print_as_torchs_for_common_ops(expr):
    rng = np.random.default_rng(0)
    xn, wn = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3, 2)).astype(np.float32)
    v = expr(vl, vl.tensor(xn), vl.tensor(wn, requires_grad=True))
    t = expr(torch, torch.tensor(xn), torch.tensor(wn, requires_grad=True))
    vname, tname = repr(v.grad_fn).split()[0], repr(t.grad_fn).split()[0]
    assert vname == tname
    assert f"grad_fn={tname}>" in repr(v) or f"grad_fn={tname[1:]}" in repr(v)


def test_random_sampler_with_huge_num_samples_draws_lazily():
    ds = vl.utils.data.TensorDataset(vl.arange(100))
    s = vl.utils.data.RandomSampler(ds, replacement=True, num_samples=10 ** 10)
    assert len(s) == 10 ** 10
    tracemalloc.start()
    t0 = time.perf_counter()
    it = iter(vl.utils.data.DataLoader(ds, sampler=s, batch_size=32))
    batches = [next(it)[0] for _ in range(50)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2 ** 20 and time.perf_counter() - t0 < 30
    allidx = np.concatenate([b.numpy() for b in batches])
    assert allidx.min() >= 0 and allidx.max() < 100 and len(np.unique(allidx)) > 80
    w = vl.utils.data.WeightedRandomSampler([1.0, 2.0, 3.0], num_samples=10 ** 10, replacement=True)
    first = [i for _, i in zip(range(1000), iter(w))]
    assert set(first) == {0, 1, 2}


def test_samplers_batch_across_chunk_boundaries_and_keep_pass_semantics():
    from varlens.utils.data import sampler as S
    n = S._CHUNK + 37
    ds = list(range(n))
    bs = vl.utils.data.BatchSampler(vl.utils.data.SequentialSampler(ds), 1000, drop_last=False)
    flat = [i for b in bs for i in b]
    assert flat == ds and len(list(bs)) == len(bs)
    bs = vl.utils.data.BatchSampler(vl.utils.data.SequentialSampler(ds), 1000, drop_last=True)
    assert len(list(bs)) == len(bs) == n // 1000
    # without replacement: each whole pass over the data is a permutation, the last pass cut short
    r = list(vl.utils.data.RandomSampler(list(range(10)), num_samples=25))
    assert sorted(r[:10]) == sorted(r[10:20]) == list(range(10)) and len(r) == 25 and len(set(r[20:])) == 5


def test_version_is_torch_compatible_and_varlens_keeps_its_own():
    assert vl.__version__ >= "2.0" and vl.__version__ >= "2.2" and not (vl.__version__ < "2.13")
    assert vl.__version__.split("+")[0] == torch.__version__.split("+")[0]   # the API level followed
    assert vl.version.varlens == vl.__version__.split("+varlens.")[1]
    from packaging.version import Version
    assert Version(vl.__version__) >= Version("2.0")


def test_refusals_say_why_and_jit_is_a_no_op():
    with pytest.raises(NotImplementedError, match="ONNX"):
        vl.onnx.export(vl.nn.Linear(2, 2), vl.ones(1, 2), "m.onnx")
    with pytest.raises(NotImplementedError, match="hub"):
        vl.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(NotImplementedError, match="complex"):
        vl.fft.rfft(vl.ones(4))
    assert vl.onnx.is_in_onnx_export() is False and vl.jit.is_scripting() is False
    m = vl.nn.Linear(2, 2)
    assert vl.jit.script(m) is m and vl.jit.trace(m, vl.ones(1, 2)) is m
    with pytest.raises(NotImplementedError, match="TorchScript"):
        vl.jit.save(m, "m.pt")
    np.testing.assert_allclose(vl.fft.fftfreq(5, 0.1).numpy(), torch.fft.fftfreq(5, 0.1).numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="complex"):
        vl.zeros(2, dtype=vl.cfloat)


def test_testing_assert_close_and_fork_rng():
    vl.testing.assert_close(vl.ones(3), vl.ones(3) + 1e-7)
    with pytest.raises(AssertionError, match="not close"):
        vl.testing.assert_close(vl.ones(3), vl.ones(3) + 1e-3)
    with pytest.raises(AssertionError, match="dtype"):
        vl.testing.assert_close(vl.ones(3), vl.ones(3, dtype=vl.float64))
    with vl.random.fork_rng():
        a = vl.rand(3)
    assert vl.rand(3).tolist() == a.tolist()


def test_compat_survey_reports_only_documented_gaps():
    sys.path.insert(0, "benchmarks")
    import compat_surface
    rows = compat_surface.survey({k: v.split() for k, v in compat_surface.COMMON.items()})
    missing = {f"{r[0]}.{n}" for r in rows for n in r[4]}
    documented = {"torch.complex", "torch.real", "torch.imag", "torch.view_as_real", "torch.view_as_complex",
                  "torch.polar", "torch.angle", "torch.nn.parameter.Buffer",
                  "torch.nn.parameter.UninitializedParameter", "torch.autograd.graph", "torch.autograd.forward_ad"}
    assert missing <= documented, f"undocumented gaps: {sorted(missing - documented)}"
    assert all(r[1] for r in rows), "every module path imports"
