"""torch.utils.data compatibility: collate/convert structures and dtypes, IterableDataset,
the multiprocessing arguments, WeightedRandomSampler, StackDataset/ChainDataset, random_split."""
import collections
import math
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from scipy import stats

import varlens as vl
import varlens.utils.data as vud

Point = collections.namedtuple("Point", "x y")


def _same(a, b, where="batch"):
    """a (varlens) has the structure, container types, dtypes and values of b (torch)."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, vl.Tensor), f"{where}: {type(a).__name__} is not a Tensor"
        assert str(a.dtype).rsplit(".", 1)[-1] == str(b.dtype).rsplit(".", 1)[-1], \
            f"{where}: dtype {a.dtype} vs {b.dtype}"
        assert tuple(a.shape) == tuple(b.shape), where
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(b, dict):
        assert list(a) == list(b), where
        for k in b:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(b, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b, where


def _conv(sample, lib):
    """The same sample built from varlens or torch tensors (NumPy and Python values as is)."""
    if isinstance(sample, np.ndarray) and sample.dtype.kind in "biuf" and getattr(sample, "_as_tensor", False):
        return lib.tensor(sample.view(np.ndarray))
    if isinstance(sample, Point):
        return Point(*(_conv(s, lib) for s in sample))
    if isinstance(sample, dict):
        return {k: _conv(v, lib) for k, v in sample.items()}
    if isinstance(sample, (list, tuple)):
        return type(sample)(_conv(s, lib) for s in sample)
    return sample


class _T(np.ndarray):
    """A NumPy array marked 'make me a tensor' for _conv."""
    _as_tensor = True


def _t(a):
    return np.asarray(a).view(_T)


def _case(k):
    r = np.random.default_rng(k)
    f32 = lambda *s: _t(r.standard_normal(s).astype(np.float32))  # noqa: E731
    return [
        [f32(3) for _ in range(4)],                                              # tensors
        [(f32(2), int(i)) for i in range(3)],                                    # tuple -> list
        [[f32(2), 1.5 * i] for i in range(3)],                                   # list -> list
        [{"x": f32(2), "y": (i, "s%d" % i), "z": {"w": True}} for i in range(3)],  # dict, nested
        [Point(f32(1), i) for i in range(3)],                                    # namedtuple
        ["a", "b", "c"],                                                         # str -> list
        [(b"x", "y"), (b"z", "w")],                                              # str fields -> tuples
        [1.5, 2.0], [1, 2], [True, False], [1, 2.5],                             # numbers
        [np.ones(2), np.zeros(2)], [np.arange(2, dtype=np.int32)] * 2,           # numpy arrays
        [np.float32(1.5), np.float32(2)], [np.int16(3), np.int16(4)], [np.bool_(True)] * 2,
        [np.float64(1.0)] * 2,
        [(np.ones((2, 2), dtype=np.float32), [1, 2]), (np.zeros((2, 2), dtype=np.float32), [3, 4])],
    ]


@pytest.mark.parametrize("i", range(len(_case(0))))
def test_default_collate_matches_torch(i):
    batch = _case(0)[i]
    _same(vud.default_collate(_conv(batch, vl)), tud.default_collate(_conv(batch, torch)))


@pytest.mark.parametrize("sample", [np.ones(2), (np.ones(2), 3), Point(np.zeros(1), 2.5), {"a": np.int8(3)},
                                    [np.ones(1), "s"], 7, "text", np.array(["a", "b"])])
def test_default_convert_matches_torch(sample):
    _same(vud.default_convert(sample), tud.default_convert(sample))


def test_collate_errors_match_torch():
    for lib, dc in ((vl, vud.default_collate), (torch, tud.default_collate)):
        with pytest.raises(RuntimeError) as e:
            dc([lib.ones(1), lib.ones(2)])
        assert str(e.value) == "stack expects each tensor to be equal size, but got [1] at entry 0 and [2] at entry 1"
        with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2, 3\] at "
                                               r"entry 0 and \[2, 4\] at entry 2"):
            dc([lib.ones(2, 3), lib.ones(2, 3), lib.ones(2, 4)])
        with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
            dc([[1, 2], [1]])
        with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
            dc([object(), object()])
        with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays"):
            dc([np.array(["a"]), np.array(["b"])])


def test_collate_keeps_autograd_of_samples():
    xs = [vl.randn(2, requires_grad=True) for _ in range(3)]
    b = vud.default_collate(xs)
    assert b.requires_grad
    (b * vl.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    assert [x.grad.tolist() for x in xs] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]


def test_tensor_dataset_batches_are_lists_like_torch():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5)
    for kw in ({"batch_size": 2}, {"batch_size": 2, "drop_last": True}, {"batch_size": None}):
        vb = list(vud.DataLoader(vud.TensorDataset(vl.tensor(x), vl.tensor(y)), **kw))
        tb = list(tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)), **kw))
        _same(vb, tb)
    sub = vud.Subset(vud.TensorDataset(vl.tensor(x)), [4, 0, 2])
    tsub = tud.Subset(tud.TensorDataset(torch.tensor(x)), [4, 0, 2])
    _same(sub.__getitems__([0, 2]), tsub.__getitems__([0, 2]))
    _same(list(vud.DataLoader(sub, batch_size=2)), list(tud.DataLoader(tsub, batch_size=2)))


class _Counting:
    """An IterableDataset over range(start, end) that shards by worker, as torch's docs do."""

    def __init__(self, start, end, with_len=True):
        self.start, self.end, self.with_len = start, end, with_len

    def _iter(self, info):
        lo, hi = self.start, self.end
        if info is not None:
            per = int(math.ceil((hi - lo) / info.num_workers))
            lo = lo + info.id * per
            hi = min(lo + per, hi)
        return iter([{"i": k, "sq": float(k * k)} for k in range(lo, hi)])


class VStream(vud.IterableDataset, _Counting):
    def __iter__(self):
        return self._iter(vud.get_worker_info())

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.end - self.start


class TStream(tud.IterableDataset, _Counting):
    def __iter__(self):
        return self._iter(tud.get_worker_info())

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.end - self.start


@pytest.mark.parametrize("kw", [{}, {"batch_size": 3}, {"batch_size": 3, "drop_last": True},
                                {"batch_size": None}, {"batch_size": 4, "shuffle": False}])
def test_iterable_dataset_batching_matches_torch(kw):
    v = vud.DataLoader(VStream(0, 7), **kw)
    t = tud.DataLoader(TStream(0, 7), **kw)
    _same(list(v), list(t))
    assert len(v) == len(t)
    _same(list(v), list(t))                                          # a second pass restarts the stream


def test_iterable_dataset_errors_like_torch():
    for lib, S in ((vud, VStream), (tud, TStream)):
        with pytest.raises(ValueError, match="expected unspecified shuffle option, but got shuffle=True"):
            lib.DataLoader(S(0, 3), shuffle=True)
        with pytest.raises(ValueError, match="expected unspecified sampler option"):
            lib.DataLoader(S(0, 3), sampler=[0, 1])
        with pytest.raises(ValueError, match="expected unspecified batch_sampler option"):
            lib.DataLoader(S(0, 3), batch_sampler=[[0, 1]])
        with pytest.raises(TypeError):
            len(lib.DataLoader(S(0, 3, with_len=False)))
    with pytest.raises(TypeError, match="IterableDataset: iterate over it"):
        VStream(0, 3)[0]


def test_chain_stack_concat_datasets_match_torch():
    ch = vud.ChainDataset([VStream(0, 2), VStream(5, 7)])
    tch = tud.ChainDataset([TStream(0, 2), TStream(5, 7)])
    _same(list(ch), list(tch))
    assert len(ch) == len(tch) == 4
    _same(list(VStream(0, 2) + VStream(3, 4)), list(TStream(0, 2) + TStream(3, 4)))
    a, b = np.arange(4.0), np.arange(4) * 10
    st, tst = vud.StackDataset(vl.tensor(a), vl.tensor(b)), tud.StackDataset(torch.tensor(a), torch.tensor(b))
    _same(st[2], tst[2])
    _same(list(vud.DataLoader(st, batch_size=3)), list(tud.DataLoader(tst, batch_size=3)))
    sd = vud.StackDataset(x=vl.tensor(a), y=vl.tensor(b))
    tsd = tud.StackDataset(x=torch.tensor(a), y=torch.tensor(b))
    _same(list(vud.DataLoader(sd, batch_size=2)), list(tud.DataLoader(tsd, batch_size=2)))
    for lib in (vud, tud):
        with pytest.raises(ValueError, match="Size mismatch between datasets"):
            lib.StackDataset([1, 2], [1])
        with pytest.raises(ValueError, match="At least one dataset should be passed"):
            lib.StackDataset()
        with pytest.raises(ValueError):
            lib.StackDataset([1], x=[1])
        with pytest.raises(ValueError, match="absolute value of index should not exceed dataset length"):
            lib.ConcatDataset([[1, 2], [3]])[-4]
    assert vud.ConcatDataset([[1, 2], [3]])[-3] == tud.ConcatDataset([[1, 2], [3]])[-3] == 1
    for lib, S, ones in ((vud, VStream, vl.ones), (tud, TStream, torch.ones)):   # AssertionError in torch
        with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
            lib.ConcatDataset([[1], S(0, 1)])
        with pytest.raises(AssertionError, match="Size mismatch between tensors"):
            lib.TensorDataset(ones(3), ones(2))
        with pytest.raises(AssertionError, match="datasets should not be an empty iterable"):
            lib.ConcatDataset([])
        with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
            list(lib.ChainDataset([[1, 2]]))
    with pytest.raises(ValueError, match="Size mismatch between tensors"):          # and the varlens type
        vud.TensorDataset(vl.ones(3), vl.ones(2))


@pytest.mark.parametrize("n,lengths", [(10, [0.5, 0.5]), (11, [0.3, 0.3, 0.4]), (7, [0.1, 0.9]), (5, [1]),
                                       (4, [1.0, 0.0]), (6, [2, 4]), (3, [0.25, 0.25, 0.25, 0.25])])
def test_random_split_sizes_match_torch(n, lengths):
    with warnings.catch_warnings(record=True) as vw:
        warnings.simplefilter("always")
        v = vud.random_split(list(range(n)), lengths, generator=vl.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t = tud.random_split(list(range(n)), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in v] == [len(s) for s in t]
    assert len(vw) == len(tw)                                         # the "Length of split ... is 0" warnings
    assert sorted(i for s in v for i in s) == list(range(n))          # a partition


def test_random_split_errors_match_torch():
    for lib in (vud, tud):
        with pytest.raises(ValueError, match="Sum of input lengths"):
            lib.random_split(list(range(5)), [2, 2])
        with pytest.raises(ValueError, match="Fraction at index 2 is not between 0 and 1"):
            lib.random_split(list(range(5)), [0.5, 0.7, -0.2])


def test_num_workers_runs_in_process_with_one_emulated_worker():
    x = vl.arange(10.0)
    g0, g2 = vl.Generator().manual_seed(3), vl.Generator().manual_seed(3)
    base = [b[0].tolist() for b in vud.DataLoader(vud.TensorDataset(x), batch_size=3, shuffle=True, generator=g0)]
    calls = []

    def init(wid):
        calls.append((wid, vud.get_worker_info().id, vud.get_worker_info().num_workers))
    dl = vud.DataLoader(vud.TensorDataset(x), batch_size=3, shuffle=True, generator=g2, num_workers=2,
                        worker_init_fn=init, prefetch_factor=4, pin_memory=True, timeout=5,
                        multiprocessing_context="spawn", in_order=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                # no warning spam
        assert [b[0].tolist() for b in dl] == base                    # same batches as num_workers=0
        list(dl)
    assert calls == [(0, 0, 1), (0, 0, 1)]                            # once per pass
    assert vud.get_worker_info() is None                              # only while fetching
    assert dl.num_workers == 2 and dl.prefetch_factor == 4 and dl.pin_memory
    pers = vud.DataLoader(VStream(0, 5), batch_size=2, num_workers=3, persistent_workers=True,
                          worker_init_fn=init)
    calls.clear()
    out = [b["i"].tolist() for b in pers] + [b["i"].tolist() for b in pers]
    assert out == [[0, 1], [2, 3], [4]] * 2                           # sharding by num_workers=1: no repeats
    assert calls == [(0, 0, 1)]                                       # persistent: initialised once
    assert vud.DataLoader(vud.TensorDataset(x), num_workers=1).prefetch_factor == 2


@pytest.mark.parametrize("kw,exc,msg", [
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified in multiprocessing"),
    ({"num_workers": 1, "prefetch_factor": -1}, ValueError, "prefetch_factor option should be non-negative"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
    ({"multiprocessing_context": "spawn"}, ValueError, "multiprocessing_context can only be used with"),
    ({"num_workers": 1, "multiprocessing_context": "nope"}, ValueError, "should specify a valid start method"),
    ({"num_workers": 1, "multiprocessing_context": 3}, TypeError, "should be a valid context object"),
    ({"batch_size": None, "drop_last": True}, ValueError, "batch_size=None option disables auto-batching"),
    ({"sampler": [0, 1], "shuffle": True}, ValueError, "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option is mutually exclusive"),
])
def test_dataloader_argument_checks_match_torch(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        tud.DataLoader(list(range(4)), **kw)
    with pytest.raises(exc, match=msg):
        vud.DataLoader(list(range(4)), **kw)


def test_dataloader_varlens_only_argument_checks():
    with pytest.raises(TypeError, match="num_workers must be an int, got str"):
        vud.DataLoader([1], num_workers="2")
    with pytest.raises(TypeError, match="worker_init_fn must be callable"):
        vud.DataLoader([1], num_workers=1, worker_init_fn=3)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        vud.DataLoader([1], batch_size=0)
    with pytest.raises(TypeError, match="unexpected argument"):
        vud.DataLoader([1], workers=2)


def test_weighted_random_sampler_distribution():
    w = [1.0, 2.0, 3.0, 4.0, 0.0]
    s = vud.WeightedRandomSampler(w, 20000, generator=vl.Generator().manual_seed(0))
    counts = np.bincount(list(s), minlength=5)
    assert counts[4] == 0 and len(s) == 20000
    p = stats.chisquare(counts[:4], 20000 * np.array(w[:4]) / 10).pvalue
    assert p > 1e-3, counts
    # without replacement: all distinct; the first draw still follows the weights
    g = vl.Generator().manual_seed(1)
    firsts = []
    for _ in range(2000):
        draw = list(vud.WeightedRandomSampler(w, 4, replacement=False, generator=g))
        assert sorted(draw) == [0, 1, 2, 3]
        firsts.append(draw[0])
    p = stats.chisquare(np.bincount(firsts, minlength=4), 2000 * np.array(w[:4]) / 10).pvalue
    assert p > 1e-3
    dl = vud.DataLoader(list(range(5)), batch_size=4, sampler=vud.WeightedRandomSampler(vl.tensor(w), 8))
    assert [len(b) for b in dl] == [4, 4] and all(0 <= i < 4 for b in dl for i in b.tolist())


def test_weighted_random_sampler_argument_checks_match_torch():
    for lib in (vud, tud):
        for bad in (0, -1, 2.5, True):
            with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
                lib.WeightedRandomSampler([1.0, 2.0], bad)
        with pytest.raises(ValueError, match="replacement should be a boolean value"):
            lib.WeightedRandomSampler([1.0, 2.0], 2, replacement=1)
        with pytest.raises(ValueError, match="weights should be a 1d sequence"):
            lib.WeightedRandomSampler([[1.0, 2.0]], 2)
        with pytest.raises(RuntimeError):                             # raised when drawing, as torch
            list(lib.WeightedRandomSampler([1.0, -2.0], 2))
    # fewer non-zero weights than draws without replacement: torch 2.13 then returns zero-weight
    # indices too; varlens refuses (documented in docs/conventions.md)
    with pytest.raises(RuntimeError, match="not enough categories with non-zero weight"):
        list(vud.WeightedRandomSampler([1.0, 0.0], 2, replacement=False))


def test_subclasses_that_change_sample_reading_are_respected():
    class Scaled(vud.TensorDataset):
        def __getitem__(self, i):
            x, y = super().__getitem__(i)
            return x * 10, y
    out = list(vud.DataLoader(Scaled(vl.arange(4.0), vl.arange(4)), batch_size=2))
    assert [b[0].tolist() for b in out] == [[0.0, 10.0], [20.0, 30.0]]   # not the raw-tensor fast path

    for lib in (vud, tud):
        class Half(lib.Subset):
            def __getitem__(self, i):
                return super().__getitem__(i) / 2
        with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
            Half([1.0, 2.0], [0])


def test_iterable_loader_resumes_mid_pass_from_state_dict():
    dl = vud.DataLoader(VStream(0, 7), batch_size=2)
    it = iter(dl)
    first = [next(it)["i"].tolist() for _ in range(2)]
    state = dl.state_dict()
    dl2 = vud.DataLoader(VStream(0, 7), batch_size=2)
    dl2.load_state_dict(state)
    rest = [b["i"].tolist() for b in dl2]
    assert first + rest == [[0, 1], [2, 3], [4, 5], [6]]


@pytest.mark.parametrize("n,reps,drop", [(10, 3, False), (10, 3, True), (4, 4, False), (2, 3, False)])
def test_distributed_sampler_partition_matches_torch(n, reps, drop):
    from torch.utils.data.distributed import DistributedSampler as TDS

    from varlens.utils.data.distributed import DistributedSampler as VDS
    for r in range(reps):
        v, t = VDS(range(n), reps, r, shuffle=False, drop_last=drop), TDS(range(n), reps, r, shuffle=False,
                                                                           drop_last=drop)
        assert list(v) == list(t) and len(v) == len(t)
    shuffled = [VDS(range(n), reps, r, seed=5, drop_last=drop) for r in range(reps)]
    got = sorted(i for s in shuffled for i in s)
    assert len(got) == shuffled[0].total_size and set(got) <= set(range(n))
    s = VDS(range(10), 1, 0)
    a = list(s)
    assert list(s) == a                                                # same epoch, same order
    s.set_epoch(1)
    assert list(s) != a and sorted(s) == list(range(10))              # a new order each epoch
    assert len(VDS(range(n))) == n and sorted(VDS(range(n))) == list(range(n))   # replica 0 of 1
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        VDS(range(n), 3, 3)
