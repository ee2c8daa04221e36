"""varlens.vision.transforms: crops, flips, normalisation, seeding, and augmentation that a
resumed run reproduces exactly (DataLoader batch_transform + checkpointed pass seed)."""
import json

import numpy as np
import pytest
import torch

import varlens as vl
from varlens import nn, optim
from varlens.train import checkpoint as C
from varlens.train.trainer import Trainer, list_checkpoints
from varlens.utils.data import DataLoader, TensorDataset
from varlens.vision import transforms as T


def _imgs(n=16, c=2, h=7, w=9, seed=0):
    return np.random.default_rng(seed).standard_normal((n, c, h, w)).astype(np.float32)


def _ref_pad(img, left, top, right, bottom, fill=0.0):
    """Zero (fill) padding of one (C, H, W) image, written element by element."""
    c, h, w = img.shape
    out = np.full((c, h + top + bottom, w + left + right), fill, dtype=img.dtype)
    for ch in range(c):
        for i in range(h):
            for j in range(w):
                out[ch, top + i, left + j] = img[ch, i, j]
    return out


def _matching_offsets(out, padded):
    """All (top, left) with padded[:, top:top+h, left:left+w] == out (a per-sample reference)."""
    h, w = out.shape[-2:]
    H, W = padded.shape[-2:]
    return [(t, l) for t in range(H - h + 1) for l in range(W - w + 1)
            if np.array_equal(padded[:, t:t + h, l:l + w], out)]


# ---------------------------------------------------------------------- RandomCrop
@pytest.mark.parametrize("size,padding", [(7, 2), ((5, 9), 1), ((6, 4), (1, 3)), ((8, 8), (2, 1, 0, 3))])
def test_batch_random_crop_is_a_window_of_the_padded_image(size, padding):
    x = _imgs()
    out = T.BatchRandomCrop(size, padding=padding)(x, generator=np.random.default_rng(3))
    th, tw = (size, size) if isinstance(size, int) else size
    assert out.shape == (16, 2, th, tw) and out.dtype == x.dtype
    p = {int: lambda q: (q,) * 4, tuple: lambda q: (q[0], q[1]) * 2 if len(q) == 2 else q}[type(padding)](padding)
    offsets = set()
    for n in range(len(x)):
        m = _matching_offsets(out[n], _ref_pad(x[n], *p))
        assert len(m) == 1, (n, m)        # random data: exactly one window matches
        offsets.add(m[0])
    assert len(offsets) > 1                # not the same window for every sample


def test_crop_offsets_cover_every_position_uniformly():
    x = np.arange(25, dtype=np.float64).reshape(1, 1, 5, 5).repeat(3000, 0)
    out = T.BatchRandomCrop(3, padding=0)(x, generator=np.random.default_rng(0))
    corner = out[:, 0, 0, 0].astype(int)   # value at the window's top-left = 5 * top + left
    counts = np.bincount(corner, minlength=25).reshape(5, 5)
    assert counts[3:].sum() == 0 and counts[:, 3:].sum() == 0      # top, left in [0, 2]
    assert np.all(np.abs(counts[:3, :3] - 3000 / 9) < 80)          # ~ uniform over the 9 corners


def test_single_image_random_crop_and_tensor_input():
    x = _imgs(1)[0]
    g = vl.Generator().manual_seed(4)
    out = T.RandomCrop(7, padding=2)(vl.tensor(x), generator=g)
    assert isinstance(out, vl.Tensor) and out.shape == (2, 7, 7)
    assert len(_matching_offsets(out.numpy(), _ref_pad(x, 2, 2, 2, 2))) == 1
    out2 = T.RandomCrop((3, 4))(x[0], generator=np.random.default_rng(0))      # (H, W) image
    assert out2.shape == (3, 4) and len(_matching_offsets(out2[None], x[:1])) == 1


@pytest.mark.parametrize("mode,torch_mode", [("constant", "constant"), ("edge", "replicate"),
                                             ("reflect", "reflect")])
def test_padding_modes_match_torch_pad(mode, torch_mode):
    x = _imgs(3, 2, 6, 5).astype(np.float64)
    # crop size = padded size: the crop is the whole padded image, so it is deterministic
    out = T.BatchRandomCrop((6 + 2 + 3, 5 + 1 + 4), padding=(1, 2, 4, 3), padding_mode=mode)(x)
    ref = torch.nn.functional.pad(torch.from_numpy(x), (1, 4, 2, 3), mode=torch_mode).numpy()
    np.testing.assert_array_equal(out, ref)


def test_symmetric_padding_fill_and_pad_if_needed():
    x = _imgs(2, 1, 4, 4).astype(np.float64)
    out = T.BatchRandomCrop(8, padding=2, padding_mode="symmetric")(x)
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="symmetric"))
    out = T.BatchRandomCrop(6, padding=1, fill=(-1.0,))(x)
    assert np.all(out[:, :, 0, :] == -1) and np.array_equal(out[:, :, 1:5, 1:5], x)
    out = T.RandomCrop(6, pad_if_needed=True, fill=7.0)(x[0], generator=np.random.default_rng(1))
    assert out.shape == (1, 6, 6) and np.array_equal(out[:, 1:5, 1:5], x[0])


# ---------------------------------------------------------------------- flips
def test_batch_flip_mirrors_exactly_the_chosen_samples():
    x = _imgs(400, 1, 3, 4)
    out = T.BatchRandomHorizontalFlip(0.5)(x, generator=np.random.default_rng(2))
    flipped = []
    for n in range(len(x)):
        mirror = np.array([[row[::-1] for row in ch] for ch in x[n]])
        same, mirrored = np.array_equal(out[n], x[n]), np.array_equal(out[n], mirror)
        assert same != mirrored
        flipped.append(mirrored)
    assert 150 < sum(flipped) < 250
    np.testing.assert_array_equal(T.BatchRandomHorizontalFlip(1.0)(x), x[..., ::-1])
    np.testing.assert_array_equal(T.BatchRandomHorizontalFlip(0.0)(x), x)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(x[0]), torch.from_numpy(x[0]).flip(-1).numpy())


# ---------------------------------------------------------------------- normalize, compose
def test_normalize_per_channel_matches_formula_and_compose_order():
    x = _imgs(5, 3, 4, 4)
    mean, std = (0.1, -0.2, 0.3), (0.5, 2.0, 1.5)
    ref = (torch.from_numpy(x) - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    np.testing.assert_allclose(T.Normalize(mean, std)(x), ref.numpy(), rtol=1e-6, atol=1e-6)
    y = x.copy()
    T.Normalize(mean, std, inplace=True)(y)
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-6, atol=1e-6)
    pipe = T.Compose([T.BatchRandomHorizontalFlip(1.0), T.Normalize(mean, std), T.Lambda(lambda a: a * 2)])
    np.testing.assert_allclose(pipe(x), 2 * ref.numpy()[..., ::-1], rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------- seeding
def test_seeding_reproduces_and_differs():
    x = _imgs(32)
    aug = T.Compose([T.BatchRandomCrop(7, padding=2), T.BatchRandomHorizontalFlip()])
    a = aug(x, generator=vl.Generator().manual_seed(1))
    b = aug(x, generator=vl.Generator().manual_seed(1))
    c = aug(x, generator=vl.Generator().manual_seed(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    vl.manual_seed(5)
    d = aug(x)
    vl.manual_seed(5)
    assert np.array_equal(d, aug(x))     # generator=None: the global varlens generator


# ---------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("make,err,match", [
    (lambda: T.RandomCrop(0), ValueError, "size"),
    (lambda: T.RandomCrop((3, 4, 5)), ValueError, "size"),
    (lambda: T.RandomCrop(3, padding=-1), ValueError, "padding"),
    (lambda: T.RandomCrop(3, padding=(1, 2, 3)), ValueError, "padding"),
    (lambda: T.RandomCrop(3, padding_mode="wrap"), ValueError, "padding_mode"),
    (lambda: T.RandomCrop(3, fill="black"), TypeError, "fill"),
    (lambda: T.RandomHorizontalFlip(p=1.5), ValueError, "p must"),
    (lambda: T.Normalize((0.5,), (0.0,)), ValueError, "std"),
    (lambda: T.Compose(T.RandomHorizontalFlip()), TypeError, "transforms"),
    (lambda: T.BatchRandomCrop(3)(np.zeros((2, 5, 5))), ValueError, r"\(N, C, H, W\).*\(2, 5, 5\)"),
    (lambda: T.BatchRandomCrop(9, padding=1)(np.zeros((2, 1, 5, 5))), ValueError, "larger than"),
    (lambda: T.RandomHorizontalFlip()([1, 2]), TypeError, "array or a varlens Tensor"),
    (lambda: T.RandomHorizontalFlip()(np.zeros((2, 2)), generator=3), TypeError, "generator"),
    (lambda: DataLoader(TensorDataset(vl.zeros(4, 1)), batch_transform=3), TypeError, "batch_transform"),
])
def test_bad_arguments_name_the_argument(make, err, match):
    with pytest.raises(err, match=match):
        make()


# ---------------------------------------------------------------------- resume reproduces augmentation
def _aug_loader(seed=5, n=40):
    X = vl.tensor(_imgs(n, 1, 6, 6, seed=1))
    y = vl.tensor(np.arange(n) % 3)
    aug = T.Compose([T.BatchRandomCrop(6, padding=1), T.BatchRandomHorizontalFlip()])
    return DataLoader(TensorDataset(X, y), batch_size=6, shuffle=True,
                      generator=vl.Generator().manual_seed(seed), batch_transform=aug)


def test_loader_resume_mid_epoch_gives_identical_augmented_batches():
    full = _aug_loader()
    ref = [[x.numpy().copy() for x, _ in full] for _ in range(3)]
    assert not np.array_equal(ref[0][0], ref[1][0][:len(ref[0][0])])   # augmentation changes per pass
    dl = _aug_loader()
    first = [x.numpy().copy() for x, _ in dl]
    it = iter(dl)
    part = [next(it)[0].numpy().copy() for _ in range(4)]               # 4 batches into pass 2
    state = json.loads(json.dumps(dl.state_dict()))                     # JSON-safe
    assert state["transform_seed"] is not None
    vl.manual_seed(77)
    dl2 = _aug_loader(seed=123)                                          # other order and draws
    dl2.load_state_dict(state)
    rest = [x.numpy() for x, _ in dl2]
    third = [x.numpy() for x, _ in dl2]
    for got, want in zip([first, part + rest, third], ref):
        assert len(got) == len(want) == 7
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_trainer_resume_with_augmentation_equals_uninterrupted(tmp_path):
    def setup(out):
        vl.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(36, 3))
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        tr = Trainer(model, opt, nn.CrossEntropyLoss(), out_dir=str(out), quiet=True, checkpoint_every=5,
                     keep_checkpoints=100)
        return tr, _aug_loader()
    tr, dl = setup(tmp_path / "a")
    tr.fit(dl, None, epochs=3)
    ref = {k: v.numpy().copy() for k, v in tr.model.state_dict().items()}
    tr2, dl2 = setup(tmp_path / "b")
    tr2.fit(dl2, None, epochs=2)
    mid = [c for c in list_checkpoints(str(tmp_path / "b")) if C.load(c)["data"]["in_epoch"]][-1]
    vl.manual_seed(999)
    tr3, dl3 = setup(tmp_path / "b")
    vl.manual_seed(999)
    tr3.fit(dl3, None, epochs=3, resume=mid)
    for k, v in tr3.model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), ref[k], err_msg=k)
    assert [r["train_loss"] for r in tr3.history] == [r["train_loss"] for r in tr.history]


def test_recipe_augment_pipeline():
    from varlens.train import recipes as R

    class St:
        mean, std = np.full(16, 0.25), np.full(16, 0.5)
    cfg = dict(augment="crop-flip", crop_padding=1, image_shape=[1, 4, 4])
    aug = R.build_augment(cfg, St)
    x = np.random.default_rng(0).random((50, 1, 4, 4)).astype(np.float32)
    out = aug(x, generator=np.random.default_rng(0))
    assert out.shape == x.shape
    for n in range(50):                         # a window of the zero-padded image, maybe mirrored, z-scored
        padded = (_ref_pad(x[n], 1, 1, 1, 1) - np.float32(0.25)) * np.float32(2.0)
        ok = _matching_offsets(out[n], padded) or _matching_offsets(out[n][..., ::-1], padded)
        assert ok, n
    assert R.build_augment(dict(augment="none"), St) is None
    with pytest.raises(ValueError, match="augment"):
        R.build_augment(dict(augment="crop-flipp"), St)
