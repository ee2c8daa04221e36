"""Every dropout variant's shape rules against PyTorch 2.13, for inputs of rank 0 to 6, in
training and eval mode, functional and module forms: whether it raises (and the exception
type), whether it warns, and which dimensions share one mask entry (a dropped channel is
zero along every shared dimension).  Sizes are large enough (>= 9 entries per mask axis at
p = 0.5) that a dimension looks shared by chance with probability < 2**-8 per check; the
pattern is read from three draws, so a chance match would have to repeat."""
import warnings

import numpy as np
import pytest
import torch

import varlens as vl

SHAPE = (9, 10, 11, 12, 9, 10)
FUNCS = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]
MODULES = {"dropout": "Dropout", "dropout1d": "Dropout1d", "dropout2d": "Dropout2d", "dropout3d": "Dropout3d",
           "alpha_dropout": "AlphaDropout", "feature_alpha_dropout": "FeatureAlphaDropout"}


def _shared_dims(y):
    """Dimensions along which the drop pattern is constant, from the array of one draw."""
    first = y.reshape(-1)[0] if y.size else 0
    z = np.isclose(y, first) if y.size else y
    return tuple(d for d in range(y.ndim) if (z == np.take(z, [0], axis=d)).all())


def _run(lib, fn, nd, training, module):
    x = lib.ones(SHAPE[:nd])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            pats = set()
            for _ in range(3):
                if module:
                    m = getattr(lib.nn, MODULES[fn])(0.5)
                    m.train(training)
                    y = m(x)
                else:
                    y = getattr(lib.nn.functional, fn)(x, 0.5, training)
                pats.add(_shared_dims(np.asarray(y.detach().numpy())))
            out = ("ok", tuple(sorted(pats)))
        except Exception as e:  # noqa: BLE001 - the exception type is what is compared
            out = ("raises", type(e).__name__)
    warned = any(issubclass(i.category, UserWarning) and "dropout" in str(i.message).lower() for i in w)
    return out, warned


@pytest.mark.parametrize("module", [False, True], ids=["functional", "module"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("nd", range(0, 7))
@pytest.mark.parametrize("fn", FUNCS)
def test_dropout_variant_shape_rules_match_torch(fn, nd, training, module):
    vl.manual_seed(nd)
    torch.manual_seed(nd)
    v, t = _run(vl, fn, nd, training, module), _run(torch, fn, nd, training, module)
    assert v == t, f"{fn} on a {nd}-D input (training={training}): varlens {v}, torch {t}"


def test_dropout2d_on_a_2d_input_warns_and_drops_elementwise():
    x = vl.ones(64, 64)
    with pytest.warns(UserWarning, match="dropout2d"):
        y = vl.nn.Dropout2d(0.5)(x).numpy()
    assert set(np.unique(y)) == {0.0, 2.0} and _shared_dims(y) == ()


def test_dropout2d_on_a_3d_input_drops_rows_of_the_first_two_dims_as_torch():
    with pytest.warns(UserWarning, match=r"\(N, C, L\)"):
        y = vl.nn.functional.dropout2d(vl.ones(8, 16, 32), 0.5).numpy()
    assert _shared_dims(y) == (2,)
