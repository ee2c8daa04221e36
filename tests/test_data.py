"""varlens.utils.data: Dataset, TensorDataset, samplers, DataLoader, collate, random_split, data-order state."""
from collections import namedtuple

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.utils.data import (BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler,
                                Subset, TensorDataset, default_collate, random_split)


def _ds(n=10):
    return TensorDataset(vl.arange(n * 3).reshape(n, 3).float(), vl.arange(n))


def test_tensor_dataset_items_and_length():
    ds = _ds(10)
    x, y = ds[4]
    assert len(ds) == 10
    np.testing.assert_array_equal(x.numpy(), [12, 13, 14])
    assert y.item() == 4


def test_tensor_dataset_rejects_size_mismatch():
    with pytest.raises(ValueError, match="tensors\\[1\\] has shape"):
        TensorDataset(vl.zeros(4, 2), vl.zeros(5))


@pytest.mark.parametrize("n,bs,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (4, 8, False)])
def test_sequential_batches_match_torch(n, bs, drop_last):
    ours = [b.numpy().tolist() for _, b in DataLoader(_ds(n), batch_size=bs, drop_last=drop_last)]
    tds = torch.utils.data.TensorDataset(torch.zeros(n, 3), torch.arange(n))
    ref = [b.tolist() for _, b in torch.utils.data.DataLoader(tds, batch_size=bs, drop_last=drop_last)]
    assert ours == ref
    assert len(DataLoader(_ds(n), batch_size=bs, drop_last=drop_last)) == len(ref)


def test_shuffle_is_a_permutation_seeded_and_changes_per_epoch():
    def order(seed, epochs=2):
        dl = DataLoader(_ds(50), batch_size=7, shuffle=True, generator=vl.Generator().manual_seed(seed))
        return [np.concatenate([y.numpy() for _, y in dl]).tolist() for _ in range(epochs)]
    a, b = order(3), order(3)
    assert a == b                                       # same seed, same order
    assert sorted(a[0]) == list(range(50))               # a permutation
    assert a[0] != a[1]                                  # a new order each epoch
    assert order(4)[0] != a[0]                           # another seed, another order


def test_fast_path_equals_per_item_collate():
    ds = _ds(23)
    g1, g2 = vl.Generator().manual_seed(1), vl.Generator().manual_seed(1)
    fast = list(DataLoader(ds, batch_size=5, shuffle=True, generator=g1))
    slow = list(DataLoader(ds, batch_size=5, shuffle=True, generator=g2, collate_fn=default_collate))
    assert len(fast) == len(slow) == 5
    for (xf, yf), (xs, ys) in zip(fast, slow):
        np.testing.assert_array_equal(xf.numpy(), xs.numpy())
        np.testing.assert_array_equal(yf.numpy(), ys.numpy())
        assert xf.dtype == xs.dtype and yf.dtype == ys.dtype


def test_default_collate_structures():
    P = namedtuple("P", "a b")
    out = default_collate([{"x": np.ones(2), "n": 1, "f": 0.5, "s": "a", "p": P(1, 2.0)},
                           {"x": np.zeros(2), "n": 2, "f": 1.5, "s": "b", "p": P(3, 4.0)}])
    assert out["x"].shape == (2, 2)
    assert out["n"].dtype == vl.int64 and out["n"].tolist() == [1, 2]
    assert out["f"].dtype == vl.float64                  # Python floats -> float64, as PyTorch
    assert out["s"] == ["a", "b"]
    assert isinstance(out["p"], P) and out["p"].a.tolist() == [1, 3]
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])


class Squares(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return float(i), i * i


def test_map_dataset_with_collate_fn_and_batch_size_none():
    dl = DataLoader(Squares(), batch_size=4)
    xs = [x.tolist() for x, _ in dl]
    assert xs == [[0, 1, 2, 3], [4, 5]]
    dl = DataLoader(Squares(), batch_size=2, collate_fn=lambda b: sum(v for _, v in b))
    assert list(dl) == [1, 13, 41]
    assert list(DataLoader(Squares(), batch_size=None))[2] == [2.0, 4]   # default_convert: tuple -> list, as torch


def test_samplers_and_batch_sampler():
    ds = _ds(10)
    assert list(SequentialSampler(ds)) == list(range(10))
    r = list(RandomSampler(ds, generator=vl.Generator().manual_seed(0)))
    assert sorted(r) == list(range(10))
    rr = list(RandomSampler(ds, replacement=True, num_samples=30, generator=vl.Generator().manual_seed(0)))
    assert len(rr) == 30 and max(rr) < 10
    bs = BatchSampler(SequentialSampler(ds), 4, drop_last=False)
    assert list(bs) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    dl = DataLoader(ds, batch_sampler=[[9, 0], [5]])
    assert [y.tolist() for _, y in dl] == [[9, 0], [5]]
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(SequentialSampler(ds), 0, False)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(_ds(), batch_size=0)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(_ds(), sampler=SequentialSampler(_ds()), shuffle=True)
    with pytest.raises(TypeError, match="valid ones"):
        DataLoader(_ds(), batchsize=3)


def test_random_split_lengths_fractions_and_errors():
    ds = _ds(10)
    a, b = random_split(ds, [7, 3], generator=vl.Generator().manual_seed(0))
    assert isinstance(a, Subset) and len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    parts = random_split(ds, [0.8, 0.1, 0.1], generator=vl.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [8, 1, 1]
    parts = random_split(_ds(11), [0.5, 0.5])
    assert sorted(len(p) for p in parts) == [5, 6]
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(ds, [3, 3])


@pytest.mark.parametrize("shuffle_gen", [True, False])
def test_state_dict_resumes_mid_epoch_exactly(shuffle_gen):
    """Saving the data order after k batches and loading it into a fresh loader continues the pass."""
    def make():
        return DataLoader(_ds(40), batch_size=6, shuffle=True,
                          generator=vl.Generator().manual_seed(5) if shuffle_gen else None)
    vl.manual_seed(0)
    full = make()
    ref = [[y.tolist() for _, y in full] for _ in range(3)]
    vl.manual_seed(0)
    dl = make()
    first = [y.tolist() for _, y in dl]                     # epoch 1
    it = iter(dl)
    part = [next(it)[1].tolist() for _ in range(3)]        # 3 batches into epoch 2
    state = dl.state_dict()
    rng = vl.get_rng_state()
    assert state["in_epoch"] and state["batches_done"] == 3
    vl.manual_seed(123)                                    # disturb everything
    dl2 = make()
    dl2.load_state_dict(state)
    vl.set_rng_state(rng)
    rest = [y.tolist() for _, y in dl2]
    third = [y.tolist() for _, y in dl2]
    assert first == ref[0]
    assert part + rest == ref[1]
    assert third == ref[2]


def test_fast_path_through_nested_subsets_equals_per_item():
    ds = _ds(30)
    a, _ = random_split(ds, [20, 10], generator=vl.Generator().manual_seed(2))
    inner = Subset(a, [19, 3, 0, 7, 7, 12])
    fast = DataLoader(inner, batch_size=4)
    assert fast._fast is not None
    slow = DataLoader(inner, batch_size=4, collate_fn=default_collate)
    for (xf, yf), (xs, ys) in zip(fast, slow):
        np.testing.assert_array_equal(yf.numpy(), ys.numpy())
        np.testing.assert_array_equal(xf.numpy(), xs.numpy())
    assert [y.tolist() for _, y in fast][0] == [a.indices[19], a.indices[3], a.indices[0], a.indices[7]]
