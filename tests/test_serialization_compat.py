"""varlens.save / varlens.load with torch.save / torch.load's arguments and habits:
file objects, map_location, weights_only, FileNotFoundError, Parameters, shared views."""
import io
import os
import pathlib

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.serialization import CheckpointError, CheckpointNotFoundError


def _roundtrip(obj, **load_kw):
    b = io.BytesIO()
    assert vl.save(obj, b) is None                                   # torch.save returns None
    b.seek(0)
    return vl.load(b, **load_kw)


def test_bytesio_open_files_and_paths(tmp_path):
    sd = {"w": vl.randn(3, 2), "n": 3, "t": (1.5, "x")}
    back = _roundtrip(sd)
    assert np.array_equal(back["w"].numpy(), sd["w"].numpy()) and back["t"] == (1.5, "x")
    p = tmp_path / "f.pt"
    with open(p, "wb") as f:
        vl.save(sd, f)
    with open(p, "rb") as f:
        assert np.array_equal(vl.load(f)["w"].numpy(), sd["w"].numpy())
    for path in (str(tmp_path / "s.pt"), pathlib.Path(tmp_path / "q.pt")):
        vl.save(sd, path)
        assert vl.load(path)["n"] == 3
    assert sorted(os.listdir(tmp_path)) == ["f.pt", "q.pt", "s.pt"]   # atomic writes leave no temp files


def test_several_objects_in_one_stream():
    b = io.BytesIO()
    vl.save({"a": 1}, b)
    vl.save([vl.ones(2)], b)
    b.seek(0)
    raw = b.getvalue()
    first = raw[:raw.index(b"VARLENS-CKPT", 10)]
    assert vl.load(io.BytesIO(first)) == {"a": 1}


def test_map_location_forms():
    b = io.BytesIO()
    vl.save({"x": vl.arange(3.0)}, b)
    forms = ["cpu", vl.device("cpu"), torch.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"},
             lambda storage, loc: storage, lambda storage, loc: None]
    for m in forms:
        b.seek(0)
        x = vl.load(b, map_location=m)["x"]
        assert isinstance(x, vl.Tensor) and x.tolist() == [0.0, 1.0, 2.0] and str(x.device) == "cpu"
    seen = []
    b.seek(0)
    vl.load(b, map_location=lambda s, loc: seen.append(loc))
    assert seen == ["cpu"]                                           # torch's (storage, location) call
    for bad in ("cuda", "cuda:1", torch.device("cuda", 0), {"cpu": "cuda:0"}):
        b.seek(0)
        with pytest.raises(RuntimeError, match="is not available; varlens runs on the CPU.*map_location='cpu'"):
            vl.load(b, map_location=bad)
    b.seek(0)
    with pytest.raises(TypeError, match="map_location must be"):
        vl.load(b, map_location=3.5)


def test_weights_only_and_mmap_and_pickle_arguments(tmp_path):
    p = tmp_path / "w.pt"
    vl.save({"x": vl.ones(2)}, p, pickle_protocol=4, _use_new_zipfile_serialization=True)
    for wo in (None, True, False):
        assert vl.load(p, weights_only=wo)["x"].tolist() == [1.0, 1.0]
    assert vl.load(p, mmap=True, weights_only=True)["x"].tolist() == [1.0, 1.0]
    assert vl.load(p, encoding="latin1")["x"].tolist() == [1.0, 1.0]   # pickle_load_args: ignored
    with pytest.raises(TypeError, match="weights_only must be None, True or False"):
        vl.load(p, weights_only="yes")
    with open(p, "rb") as f, pytest.raises(ValueError, match="mmap=True needs 'f' to be a file path"):
        vl.load(f, mmap=True)


def test_missing_file_is_file_not_found_and_bad_parent_dir(tmp_path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(FileNotFoundError, match="nope.pt.*does not exist"):
        vl.load(missing)
    with pytest.raises(CheckpointError):                             # still a CheckpointError / RuntimeError
        vl.load(str(missing))
    assert issubclass(CheckpointNotFoundError, RuntimeError)
    with pytest.raises(FileNotFoundError):                           # the torch behaviour we mirror
        torch.load(missing)
    # a missing parent directory: torch and varlens both raise RuntimeError naming it
    target = tmp_path / "no_dir" / "x.pt"
    with pytest.raises(RuntimeError, match="Parent directory"):
        torch.save({"a": 1}, target)
    with pytest.raises(RuntimeError, match=f"Parent directory {tmp_path / 'no_dir'} does not exist"):
        vl.save({"a": 1}, target)
    assert not (tmp_path / "no_dir").exists()


def test_bad_targets_and_empty_streams():
    with pytest.raises(AttributeError, match="expected 'f' to be a string, path, or a file-like"):
        vl.save({}, 5)
    with pytest.raises(AttributeError, match="'read' attribute"):
        vl.load(5)
    b = io.BytesIO()
    vl.save({"a": 1}, b)
    with pytest.raises(CheckpointError, match=r"seek\(0\)"):         # forgot to rewind
        vl.load(b)
    tb = io.BytesIO()
    torch.save({"a": torch.ones(1)}, tb)
    tb.seek(0)
    with pytest.raises(CheckpointError, match="not a varlens checkpoint"):
        vl.load(tb)


def test_parameter_and_requires_grad_round_trip_like_torch():
    w = vl.nn.Parameter(vl.randn(2, 2))
    frozen = vl.nn.Parameter(vl.randn(2), requires_grad=False)
    x = vl.randn(3, requires_grad=True)
    y = x * 2                                                        # non-leaf: loads as a leaf
    back = _roundtrip({"w": w, "f": frozen, "x": x, "y": y, "plain": vl.ones(1)})
    tw, tf = torch.nn.Parameter(torch.randn(2, 2)), torch.nn.Parameter(torch.randn(2), requires_grad=False)
    tx = torch.randn(3, requires_grad=True)
    tb = io.BytesIO()
    torch.save({"w": tw, "f": tf, "x": tx, "y": tx * 2, "plain": torch.ones(1)}, tb)
    tb.seek(0)
    tback = torch.load(tb)
    for k in ("w", "f", "x", "y", "plain"):
        assert type(back[k]).__name__ == type(tback[k]).__name__, k
        assert back[k].requires_grad == tback[k].requires_grad, k
        assert back[k].is_leaf and tback[k].is_leaf
    assert isinstance(back["w"], vl.nn.Parameter)
    np.testing.assert_array_equal(back["w"].detach().numpy(), w.detach().numpy())
    np.testing.assert_array_equal(back["y"].detach().numpy(), y.detach().numpy())
    back["w"].sum().backward()                                       # a usable leaf
    assert back["w"].grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_views_saved_together_share_memory_like_torch():
    base = vl.arange(12.0).reshape(3, 4)
    back = _roundtrip({"base": base, "rows": base[1:], "t": base.t(), "step": base[:, ::2], "again": base})
    t = torch.arange(12.0).reshape(3, 4)
    tb = io.BytesIO()
    torch.save({"base": t, "rows": t[1:], "t": t.t(), "step": t[:, ::2], "again": t}, tb)
    tb.seek(0)
    tback = torch.load(tb)
    for k in ("rows", "t", "step"):
        np.testing.assert_array_equal(back[k].numpy(), tback[k].numpy())
    back["base"][1, 2] = 100.0
    tback["base"][1, 2] = 100.0
    for k in ("rows", "t", "step", "again"):
        np.testing.assert_array_equal(back[k].numpy(), tback[k].numpy())
    assert back["rows"][0, 2].item() == 100.0 and back["again"][1, 2].item() == 100.0
    # a view saved alone is stored as just its own elements (not its whole buffer)
    b = io.BytesIO()
    vl.save(base[2], b)
    from varlens.serialization import _HEADER
    with np.load(io.BytesIO(b.getvalue()[_HEADER:])) as z:
        assert z["a0"].shape == (4,)
    b.seek(0)
    assert vl.load(b).tolist() == [8.0, 9.0, 10.0, 11.0]


def test_whole_optimizer_is_refused_with_state_dict_hint():
    # whole modules save (tests/test_module_save.py); other objects with a state_dict do not
    opt = vl.optim.SGD(vl.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"cannot save a whole SGD.*optimizer\.state_dict\(\)"):
        vl.save({"opt": opt}, io.BytesIO())
    m = vl.nn.Linear(2, 2)
    back = _roundtrip(m.state_dict())
    m2 = vl.nn.Linear(2, 2)
    m2.load_state_dict(back)
    np.testing.assert_array_equal(m2.weight.detach().numpy(), m.weight.detach().numpy())


def test_dtypes_devices_and_numpy_values_round_trip():
    obj = {"dtype": vl.float32, "i": vl.int64, "dev": vl.device("cpu"), "np": np.arange(3, dtype=np.int16),
           "c": np.array([1 + 2j]), "npf": np.float32(1.5)}
    back = _roundtrip(obj)
    assert back["dtype"] == vl.float32 and back["i"] == vl.int64 and back["dev"] == vl.device("cpu")
    assert back["np"].dtype == np.int16 and back["c"][0] == 1 + 2j and back["npf"] == 1.5
    assert vl.zeros(2, dtype=back["dtype"]).dtype == vl.float32


def test_trainer_creates_its_checkpoint_folders(tmp_path):
    from varlens.train import Trainer
    m = vl.nn.Linear(2, 2)
    tr = Trainer(m, vl.optim.SGD(m.parameters(), lr=0.1), vl.nn.CrossEntropyLoss(), quiet=True)
    p = tr.save_checkpoint(path=str(tmp_path / "new" / "deeper" / "c.ckpt"))
    assert vl.load(p)["model"]["weight"].shape == (2, 2)
    tr2 = Trainer(m, vl.optim.SGD(m.parameters(), lr=0.1), vl.nn.CrossEntropyLoss(), quiet=True,
                  out_dir=str(tmp_path / "run"))
    assert os.path.exists(tr2.save_checkpoint())                      # run/checkpoints/ made on demand
