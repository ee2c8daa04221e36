"""The simulated CUDA library offers only what CuPy offers (varlens/core/cupy_api.py, read from
CuPy v13.6.0's source), so code that needs a NumPy-only name fails here as on a GPU; and every
``xp.<name>`` varlens reaches, and every keyword it passes to one, exists in CuPy (static scans
of the package).  Plus the device
paths written because CuPy lacks a name: the special functions (airy_ai, spherical_bessel_j0,
the orthogonal polynomials) and the running max/min scan."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import scipy.special as sps

import varlens as vl
from varlens import special as S
from varlens.core import array as B
from varlens.core import cupy_api as api
from varlens.core.simulated_cuda import SimArray, sim

pytestmark = pytest.mark.simulator_only   # tests of the simulator itself


def _dev(a):
    return sim.asarray(np.asarray(a))


# NumPy names (NumPy has every one; the simulator used to serve them) that CuPy v13 lacks
MISSING = [
    (lambda: sim.put_along_axis, "put_along_axis"),
    (lambda: sim.bool, "bool"),
    (lambda: sim.concat, "concat"),
    (lambda: sim.linalg.eig, "eig"),
    (lambda: sim.linalg.multi_dot, "multi_dot"),
    (lambda: sim.random.default_rng(0).normal, "normal"),
    (lambda: sim.random.default_rng(0).permutation, "permutation"),
    (lambda: sim.random.default_rng(0).choice, "choice"),
    (lambda: sim.random.RandomState(0).bytes, "bytes"),
    (lambda: _dev([[1.0, 2.0]]).mT, "mT"),
    (lambda: _dev([1.0, 2.0]).itemset, "itemset"),
    (lambda: _dev([1.0, 2.0]).resize, "resize"),
    (lambda: _dev([1.0, 2.0]).byteswap, "byteswap"),
    (lambda: sim.special.airy, "airy"),
    (lambda: sim.special.eval_legendre, "eval_legendre"),
    (lambda: sim.special.spherical_jn, "spherical_jn"),
]


@pytest.mark.parametrize("get,name", MISSING, ids=[n for _, n in MISSING])
def test_simulator_refuses_what_cupy_lacks(get, name):
    with pytest.raises(AttributeError, match=rf"'{name}' \(simulated: CuPy lacks it"):
        get()


def test_simulator_refuses_ufunc_methods_and_keywords_cupy_lacks():
    a = _dev([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    with pytest.raises(NotImplementedError, match="maximum.accumulate"):
        sim.maximum.accumulate(a, axis=-1)
    with pytest.raises(NotImplementedError, match="maximum.reduce"):
        sim.maximum.reduce(a, axis=0)
    with pytest.raises(TypeError, match="'where'"):
        sim.sum(a, where=a > 1)
    with pytest.raises(TypeError, match="'initial'"):
        a.max(axis=0, initial=0.0)
    with pytest.raises(TypeError, match="'kind'"):
        a.argsort(kind="stable")
    with pytest.raises(TypeError, match="'mode'"):
        sim.take(a, _dev([0]), axis=1, mode="clip")
    with pytest.raises(TypeError, match="'min'"):
        sim.clip(a, min=0.0)
    with pytest.raises(TypeError, match="Unsupported type"):
        sim.maximum(a, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="float32 or float64"):
        sim.random.default_rng(0).random(3, dtype=np.int32)
    # what CuPy has still works, on the device
    assert sim.add.reduce(a, axis=0).tolist() == [3.0, 6.0, 6.0]
    assert sim.cumsum(a, axis=-1).__class__ is SimArray
    assert sim.argsort(a, axis=-1, kind="stable").tolist() == [[1, 2, 0], [0, 2, 1]]
    b = sim.zeros(3)
    sim.add.at(b, _dev([0, 0, 2]), 1.0)
    assert b.tolist() == [2.0, 0.0, 1.0]
    r = sim.random.RandomState(0).standard_normal((4,), dtype=np.float32)
    assert r.__class__ is SimArray and r.dtype == np.float32
    g = sim.random.default_rng(0)
    assert g.standard_normal((2,), dtype=np.float32).dtype == np.float32
    assert g.integers(0, 5, (3,)).__class__ is SimArray


@pytest.mark.parametrize("where,names,module", [
    ("cupy", api.NAMESPACE, np), ("cupy.linalg", api.LINALG, np.linalg), ("cupy.fft", api.FFT, np.fft),
    ("cupy.random", api.RANDOM, np.random)], ids=["cupy", "linalg", "fft", "random"])
def test_simulator_serves_every_cupy_name_numpy_has(where, names, module):
    ns = {"cupy": sim, "cupy.linalg": sim.linalg, "cupy.fft": sim.fft, "cupy.random": sim.random}[where]
    shared = sorted(n for n in names if hasattr(module, n))
    assert len(shared) > 0.6 * len(names)
    for n in shared:
        getattr(ns, n)          # must not raise


# ---------------------------------------------------------------- static scan of varlens
_NS_USE = re.compile(r"(?<![\w.])(?:self\.)?(xp|ns|lib)\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")
_SUB = {"random": api.RANDOM, "linalg": api.LINALG, "fft": api.FFT, "special": api.SPECIAL,
        "lib": frozenset({"stride_tricks"})}
ADDED_BY_VARLENS = {"errstate", "special", "simulated"}      # core/array.py adds them to CuPy
# reached on host arrays only (a NumPy alias, or a branch taken only when xp is NumPy)
HOST_ONLY = {("put_along_axis", "varlens/ops/index.py"), ("put_along_axis", "varlens/models/gpt.py"),
             ("maximum.reduce", "varlens/ops/nn/linear.py")}


def _uses():
    root = pathlib.Path(vl.__file__).parent
    for p in sorted(root.rglob("*.py")):
        rel = "varlens/" + p.relative_to(root).as_posix()
        if p.name in ("simulated_cuda.py", "cupy_api.py"):
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for m in _NS_USE.finditer(line.split("#")[0]):
                var, a, b = m.groups()
                if var != "xp" and rel.startswith("varlens/lens/"):   # the lens's ns/lib are other things
                    continue
                yield rel, i, a, b


def test_every_namespace_name_varlens_reaches_exists_in_cupy():
    bad, seen = [], 0
    for rel, i, a, b in _uses():
        seen += 1
        if a not in api.NAMESPACE and a not in ADDED_BY_VARLENS:
            name = a
        elif a in _SUB and b and not b.startswith("_") and b not in _SUB[a]:
            name = f"{a}.{b}"
        elif api.UFUNC_METHODS.get(b) is not None and a not in api.UFUNC_METHODS[b]:
            name = f"{a}.{b}"
        else:
            continue
        if (name, rel) not in HOST_ONLY:
            bad.append(f"{rel}:{i}: xp.{name}")
    assert seen > 500, seen
    assert not bad, "names CuPy v13 lacks (core/cupy_api.py):\n" + "\n".join(bad)


HOST_ONLY_KEYWORDS = {("reshape", "copy", "varlens/ops/shape.py")}   # (view's check, on NumPy arrays only)


def test_every_keyword_varlens_passes_to_a_cupy_function_exists_there():
    """Calls ``xp.f(..., k=v)`` (also ``self.xp.``, ``ns.``, ``lib.``, ``xp.linalg.``, ``xp.fft.``)
    whose CuPy function is written in Python: every keyword must be one it takes."""
    import ast
    root = pathlib.Path(vl.__file__).parent
    bad, seen = [], 0
    for p in sorted(root.rglob("*.py")):
        rel = "varlens/" + p.relative_to(root).as_posix()
        if p.name in ("simulated_cuda.py", "cupy_api.py"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            base, key = node.func.value, None
            if isinstance(base, ast.Name) and (base.id == "xp" or base.id in ("ns", "lib")
                                               and not rel.startswith("varlens/lens/")):
                key = node.func.attr
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
                if base.attr == "xp" and base.value.id == "self":
                    key = node.func.attr
                elif base.attr in ("linalg", "fft") and base.value.id == "xp":
                    key = f"{base.attr}.{node.func.attr}"
            ok = api.KEYWORDS.get(key)
            if ok is None:
                continue
            seen += 1
            for k in node.keywords:
                if k.arg and k.arg not in ok and (key, k.arg, rel) not in HOST_ONLY_KEYWORDS:
                    bad.append(f"{rel}:{node.lineno}: xp.{key}({k.arg}=...)")
    assert seen > 300, seen
    assert not bad, "keywords CuPy v13's function does not take (core/cupy_api.py KEYWORDS):\n" + "\n".join(bad)


def test_special_functions_looked_up_by_name_exist_in_cupyx():
    """``_sp("name", xp)`` / ``_scipy_unary(cls, "name", ...)`` look a function up in cupyx.scipy.special
    on the device; the CPU-only ones (varlens/special.py computes them itself there) are listed."""
    root = pathlib.Path(vl.__file__).parent
    cpu_only = {"airy", "spherical_jn"}
    found = set()
    for p in (root / "ops" / "special.py", root / "special.py"):
        text = p.read_text()
        found |= set(re.findall(r"_sp\(\"(\w+)\"", text)) | set(re.findall(r"_scipy_unary\(\"\w+\", \"(\w+)\"", text))
    found |= {fn for fn, _ in S._NO_GRAD.values() if isinstance(fn, str)}
    assert len(found) > 15
    assert not sorted(found - api.SPECIAL - cpu_only)
    assert {n.replace("_sh_", "_") for n in S._POLYS.values()} <= set(S._RECURRENCE)


# ---------------------------------------------------------------- the device paths CuPy needs
@pytest.mark.parametrize("n", [1, 2, 7, 8, 13])
def test_running_extreme_scan_matches_accumulate(n):
    from varlens.ops.scan import _running
    a = np.random.default_rng(n).standard_normal((3, n))
    a[1, n // 2] = np.nan
    for op in ("maximum", "minimum"):
        want = getattr(np, op).accumulate(a, axis=-1)
        got = _running(sim, getattr(sim, op), _dev(a)).get()
        np.testing.assert_array_equal(got, want)


def test_airy_and_spherical_j0_on_the_device_match_scipy(sim_cuda):
    x = np.concatenate([np.linspace(-30, 30, 1201), [0.0, -6.5, 2.0, 80.0]])
    y = S.airy_ai(vl.tensor(x).cuda())
    assert y.is_cuda
    ref = sps.airy(x)[0]
    np.testing.assert_allclose(y.cpu().numpy(), ref, rtol=1e-10, atol=2e-12)
    pos = x > 0
    np.testing.assert_allclose(y.cpu().numpy()[pos], ref[pos], rtol=1e-11, atol=0)   # tiny values too
    j = S.spherical_bessel_j0(vl.tensor(x).cuda())
    np.testing.assert_allclose(j.cpu().numpy(), sps.spherical_jn(0, x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "hermite_polynomial_h",
                                  "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
                                  "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u"])
def test_polynomials_on_the_device_match_the_cpu(name, sim_cuda):
    fn = getattr(S, name)
    x = np.linspace(-1.5, 1.5, 7)[:, None]
    n = np.array([-1, 0, 1, 2, 5, 9])
    want = fn(vl.tensor(x), vl.tensor(n)).numpy()
    xd = vl.tensor(x).cuda()
    before = sim_cuda.host_syncs[0]
    got = fn(xd, vl.tensor(n).cuda())            # a degree on the device: read once
    if getattr(B.cuda_namespace(), "simulated", False):
        assert sim_cuda.host_syncs[0] - before == 1
    assert got.is_cuda
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    with sim_cuda.forbid_host_sync():            # a degree given as a number: no sync
        got = fn(xd.float(), 5)
    np.testing.assert_allclose(got.cpu().numpy(), fn(vl.tensor(x).float(), 5).numpy(), rtol=2e-5, atol=1e-5)
