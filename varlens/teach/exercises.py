"""Backward-pass exercises: a teacher blanks out an op's backward, a student writes it, and the
grader holds the student's version against the library's own op and against finite differences.

Each exercise is a PyTorch-style ``autograd.Function`` whose forward is given and whose backward
is left to write.  ``template(name)`` is the student's file; ``grade(name, cls)`` runs the checks:

1. ``implemented`` - backward returns something (not NotImplementedError);
2. ``shapes``      - one gradient per input, each of its input's shape;
3. ``reference``   - equal (float64, rel. 1e-6) to the gradient of varlens's own op on random inputs;
4. ``finite_differences`` - ``check_gradients`` passes (entry-by-entry centred differences);
5. ``edge_cases``  - the inputs where mistakes hide (ties at zero for ReLU, a single row for batch
                     norm, large logits for softmax, ...).

The notes' sections each exercise comes from are named in its description.
"""
from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np

import varlens as vl
import varlens.nn.functional as F
from varlens.autograd.gradcheck_report import check_gradients


@dataclasses.dataclass
class Exercise:
    name: str
    title: str
    notes: str               # where in the notes the derivative is derived
    forward_src: str         # the given forward (ctx-style), indented as a method body
    solution_src: str        # the backward the teacher keeps (used by the self-test)
    reference: object        # reference(*inputs) -> output built from varlens's own ops
    inputs: object           # inputs(rng) -> tuple of float64 arrays (the differentiated ones first)
    edge_inputs: object      # edge_inputs(rng) -> list of input tuples
    n_grad: int              # how many leading inputs get gradients
    hint: str


def _r(rng, *shape):
    return rng.standard_normal(shape)


def _attention_ref(q, k, v):
    return F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _lstm_ref(x, h, c, w_ih, w_hh, b):
    gates = x @ w_ih.T + h @ w_hh.T + b
    i, f, g, o = gates.chunk(4, dim=-1)
    c2 = vl.sigmoid(f) * c + vl.sigmoid(i) * vl.tanh(g)
    return vl.sigmoid(o) * vl.tanh(c2)


def _bn_ref(x, gamma, beta):
    mu = x.mean(0, keepdim=True)
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return (x - mu) / vl.sqrt(var + 1e-5) * gamma + beta


def _dropout_mask(shape, p=0.5, seed=0):
    return (np.random.default_rng(seed).random(shape) >= p) / (1 - p)


EXERCISES = {e.name: e for e in [
    Exercise(
        "linear", "Linear layer y = x W^T + b", "seed 003 sec. 1.6 (backpropagation); seed 001 sec. 1",
        forward_src="""
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias""",
        solution_src="""
        x, weight = ctx.saved_tensors
        return grad_out @ weight, grad_out.T @ x, grad_out.sum(0)""",
        reference=lambda x, w, b: F.linear(x, w, b),
        inputs=lambda rng: (_r(rng, 5, 4), _r(rng, 3, 4), _r(rng, 3)),
        edge_inputs=lambda rng: [(_r(rng, 1, 4), _r(rng, 3, 4), _r(rng, 3))],
        n_grad=3, hint="dL/dx = g W, dL/dW = g^T x, dL/db = sum of g over the batch"),
    Exercise(
        "relu", "ReLU", "seed 001 sec. 2.3",
        forward_src="""
        ctx.save_for_backward(x)
        return x.clamp(min=0)""",
        solution_src="""
        x, = ctx.saved_tensors
        return grad_out * (x > 0).to(grad_out.dtype)""",
        reference=lambda x: F.relu(x),
        inputs=lambda rng: (_r(rng, 6, 5),),
        edge_inputs=lambda rng: [(np.array([-1.0, 0.0, 0.0, 2.0]),)],
        n_grad=1, hint="the derivative is 1 where x > 0 and 0 elsewhere (0 at x = 0, as PyTorch)"),
    Exercise(
        "softmax_cross_entropy", "softmax + cross-entropy on logits", "seed 001 sec. 3.1; seed 003 Example 1.6.6",
        forward_src="""
        ctx.save_for_backward(logits)
        ctx.target = target
        z = logits - logits.max(dim=1, keepdim=True).values
        logp = z - z.exp().sum(dim=1, keepdim=True).log()
        return -logp[range(logits.shape[0]), target].mean()""",
        solution_src="""
        logits, = ctx.saved_tensors
        p = logits.softmax(dim=1)
        p[range(logits.shape[0]), ctx.target] -= 1
        return grad_out * p / logits.shape[0], None""",
        reference=lambda logits, target: F.cross_entropy(logits, target),
        inputs=lambda rng: (_r(rng, 6, 4), vl.tensor(rng.integers(0, 4, 6))),
        edge_inputs=lambda rng: [(np.array([[50.0, -50.0, 0.0], [0.0, 0.0, 0.0]]), vl.tensor([0, 2]))],
        n_grad=1, hint="dL/dz = (softmax(z) - onehot(y)) / N"),
    Exercise(
        "batch_norm", "batch normalisation (training mode)", "seed 004 (BN backprop); seed 001 sec. 4",
        forward_src="""
        mu = x.mean(0, keepdim=True)
        var = ((x - mu) ** 2).mean(0, keepdim=True)
        xhat = (x - mu) / (var + 1e-5).sqrt()
        ctx.save_for_backward(xhat, gamma, (var + 1e-5).sqrt())
        return xhat * gamma + beta""",
        solution_src="""
        xhat, gamma, std = ctx.saved_tensors
        n = xhat.shape[0]
        gx = grad_out * gamma
        dx = (gx - gx.mean(0, keepdim=True) - xhat * (gx * xhat).mean(0, keepdim=True)) / std
        return dx, (grad_out * xhat).sum(0), grad_out.sum(0)""",
        reference=_bn_ref,
        inputs=lambda rng: (_r(rng, 8, 3), 1 + 0.1 * _r(rng, 3), _r(rng, 3)),
        edge_inputs=lambda rng: [(_r(rng, 2, 3) * 100, 1 + 0.1 * _r(rng, 3), _r(rng, 3))],
        n_grad=3, hint="three terms: the direct path, the mean's path and the variance's path"),
    Exercise(
        "dropout", "inverted dropout with a given mask", "seed 001 sec. 2 (dropout); seed 000",
        forward_src="""
        ctx.save_for_backward(mask)
        return x * mask""",
        solution_src="""
        mask, = ctx.saved_tensors
        return grad_out * mask, None""",
        reference=lambda x, mask: x * mask,
        inputs=lambda rng: (_r(rng, 6, 5), vl.tensor(_dropout_mask((6, 5)))),
        edge_inputs=lambda rng: [(_r(rng, 3, 3), vl.tensor(_dropout_mask((3, 3), p=0.9, seed=1)))],
        n_grad=1, hint="the same mask, with the same 1/(1-p) scale, multiplies the gradient"),
    Exercise(
        "lstm_cell", "LSTM cell (hidden output)", "seed 003 (RNN, LSTM)",
        forward_src="""
        gates = x @ w_ih.T + h @ w_hh.T + b
        i, f, g, o = gates.chunk(4, dim=-1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        c2 = f * c + i * g
        ctx.save_for_backward(x, h, c, w_ih, w_hh, i, f, g, o, c2)
        return o * c2.tanh()""",
        solution_src="""
        x, h, c, w_ih, w_hh, i, f, g, o, c2 = ctx.saved_tensors
        tc = c2.tanh()
        do = grad_out * tc
        dc2 = grad_out * o * (1 - tc * tc)
        di, df, dg, dc = dc2 * g, dc2 * c, dc2 * i, dc2 * f
        dgates = vl.cat([di * i * (1 - i), df * f * (1 - f), dg * (1 - g * g), do * o * (1 - o)], dim=-1)
        return (dgates @ w_ih, dgates @ w_hh, dc, dgates.T @ x, dgates.T @ h, dgates.sum(0))""",
        reference=_lstm_ref,
        inputs=lambda rng: (_r(rng, 3, 4), _r(rng, 3, 2), _r(rng, 3, 2), 0.5 * _r(rng, 8, 4), 0.5 * _r(rng, 8, 2),
                            0.1 * _r(rng, 8)),
        edge_inputs=lambda rng: [(_r(rng, 1, 4) * 5, _r(rng, 1, 2), _r(rng, 1, 2), 0.5 * _r(rng, 8, 4),
                                  0.5 * _r(rng, 8, 2), 0.1 * _r(rng, 8))],
        n_grad=6, hint="go back through h = o tanh(c'), c' = f c + i g, then the four gate nonlinearities"),
    Exercise(
        "attention", "scaled dot-product attention (one head)", "seed 002 (where 1/sqrt(d) comes from); seed 003 (Transformers)",
        forward_src="""
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        a = s.softmax(dim=-1)
        ctx.save_for_backward(q, k, v, a)
        return a @ v""",
        solution_src="""
        q, k, v, a = ctx.saved_tensors
        da = grad_out @ v.transpose(-2, -1)
        ds = a * (da - (da * a).sum(-1, keepdim=True)) / q.shape[-1] ** 0.5
        return ds @ k, ds.transpose(-2, -1) @ q, a.transpose(-2, -1) @ grad_out""",
        reference=_attention_ref,
        inputs=lambda rng: (_r(rng, 4, 3), _r(rng, 5, 3), _r(rng, 5, 2)),
        edge_inputs=lambda rng: [(_r(rng, 1, 3) * 10, _r(rng, 2, 3) * 10, _r(rng, 2, 2))],
        n_grad=3, hint="softmax's Jacobian-vector product: a * (da - sum(da * a)), then the 1/sqrt(d) scale"),
]}

_ARGS = {"linear": "x, weight, bias", "relu": "x", "softmax_cross_entropy": "logits, target",
         "batch_norm": "x, gamma, beta", "dropout": "x, mask", "lstm_cell": "x, h, c, w_ih, w_hh, b",
         "attention": "q, k, v"}


def class_name(name):
    return "".join(p.capitalize() for p in name.split("_"))


def template(name, solution=False):
    """The student's file for exercise ``name`` (with the teacher's backward when ``solution``)."""
    ex = get(name)
    body = ex.solution_src if solution else f'''
        # TODO: return one gradient per input of forward ({_ARGS[name]}), None for non-tensors.
        # Hint: {ex.hint}.
        raise NotImplementedError("write the backward of {ex.title}")'''
    return (f'"""Exercise: the backward pass of {ex.title} (notes: {ex.notes}).\n\n'
            f'Check it with: varlens teach check {name}_exercise.py (or pytest -m exercise)\n"""\n'
            "import varlens as vl\n\n\n"
            f"class {class_name(name)}(vl.autograd.Function):\n"
            "    @staticmethod\n"
            f"    def forward(ctx, {_ARGS[name]}):{textwrap.indent(textwrap.dedent(ex.forward_src), '        ')}\n\n"
            "    @staticmethod\n"
            f"    def backward(ctx, grad_out):{textwrap.indent(textwrap.dedent(body), '        ')}\n")


def grading_tests(name, student_file):
    """A pytest file grading ``student_file`` on exercise ``name`` (one test per check, marked)."""
    return (f'"""Grading of the {name} exercise (run: pytest -m exercise {name}_grading_test.py)."""\n'
            "import importlib.util\nimport pathlib\n\nimport pytest\n\nfrom varlens.teach import grade\n\n"
            f'pytestmark = pytest.mark.exercise("{name}")\n'
            f'_path = pathlib.Path(__file__).with_name("{student_file}")\n'
            "_spec = importlib.util.spec_from_file_location('student', _path)\n"
            "_mod = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_mod)\n"
            f"_results = {{r.check: r for r in grade('{name}', _mod.{class_name(name)})}}\n\n\n"
            "@pytest.mark.parametrize('check', ['implemented', 'shapes', 'reference', 'finite_differences', "
            "'edge_cases'])\ndef test_check(check):\n    r = _results[check]\n    assert r.passed, r.message\n")


def get(name):
    if name not in EXERCISES:
        raise KeyError(f"unknown exercise {name!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[name]


@dataclasses.dataclass
class Result:
    check: str
    passed: bool
    message: str


def _tensors(arrays, n_grad):
    out = []
    for i, a in enumerate(arrays):
        if isinstance(a, vl.Tensor):
            out.append(a)
        else:
            out.append(vl.tensor(np.asarray(a, dtype=np.float64), requires_grad=i < n_grad))
    return out


def _reference_grads(ex, arrays):
    ts = _tensors(arrays, ex.n_grad)
    out = ex.reference(*ts)
    w = np.random.default_rng(7).standard_normal(out.shape)
    (out * vl.tensor(w)).sum().backward()
    return [t.grad.numpy() for t in ts[:ex.n_grad]], w


def _student_grads(ex, cls, arrays, w):
    ts = _tensors(arrays, ex.n_grad)
    out = cls.apply(*ts)
    (out * vl.tensor(w)).sum().backward()
    return [None if t.grad is None else t.grad.numpy() for t in ts[:ex.n_grad]]


def grade(name, cls):
    """Run the five checks of exercise ``name`` on the student's Function class ``cls``."""
    ex = get(name)
    rng = np.random.default_rng(0)
    arrays = ex.inputs(rng)
    results = []
    ref, w = _reference_grads(ex, arrays)
    try:
        got = _student_grads(ex, cls, arrays, w)
    except NotImplementedError as e:
        msg = f"backward is not written yet ({e})"
        return [Result(c, False, msg) for c in ("implemented", "shapes", "reference", "finite_differences",
                                                 "edge_cases")]
    except Exception as e:  # noqa: BLE001 - the student's error is the message
        msg = f"backward raised {type(e).__name__}: {e}"
        return [Result("implemented", True, "backward returns")] + [
            Result(c, False, msg) for c in ("shapes", "reference", "finite_differences", "edge_cases")]
    results.append(Result("implemented", True, "backward returns"))
    bad = [f"input {i}: got {None if g is None else g.shape}, expected {r.shape}"
           for i, (g, r) in enumerate(zip(got, ref)) if g is None or g.shape != r.shape]
    results.append(Result("shapes", not bad, "; ".join(bad) or "one gradient of the right shape per input"))
    results.append(_compare("reference", got, ref, "the library's own op"))
    fd = check_gradients(lambda *xs: cls.apply(*xs, *_tensors(arrays, ex.n_grad)[ex.n_grad:]),
                         _tensors(arrays, ex.n_grad)[:ex.n_grad], seed=12345)
    results.append(Result("finite_differences", fd.ok, str(fd)))
    msgs, ok = [], True
    for k, edge in enumerate(ex.edge_inputs(rng)):
        ref_e, w_e = _reference_grads(ex, edge)
        try:
            got_e = _student_grads(ex, cls, edge, w_e)
        except Exception as e:  # noqa: BLE001
            ok = False
            msgs.append(f"edge case {k}: {type(e).__name__}: {e}")
            continue
        r = _compare("edge", got_e, ref_e, "the library's op")
        ok = ok and r.passed
        msgs.append(f"edge case {k}: {r.message}")
    results.append(Result("edge_cases", ok, "; ".join(msgs)))
    return results


def _compare(check, got, ref, what):
    msgs = []
    for i, (g, r) in enumerate(zip(got, ref)):
        if g is None or g.shape != r.shape:
            msgs.append(f"input {i}: missing or wrong shape")
            continue
        err = float(np.max(np.abs(g - r) / np.maximum(np.abs(g) + np.abs(r), 1e-8)))
        if not err <= 1e-6:
            k = np.unravel_index(int(np.argmax(np.abs(g - r))), r.shape)
            msgs.append(f"input {i}: relative error {err:.2e} against {what} (e.g. at {k}: {g[k]:.6g} "
                        f"vs {r[k]:.6g})")
    return Result(check, not msgs, "; ".join(msgs) or f"matches {what}")
