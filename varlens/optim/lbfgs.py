"""L-BFGS (PyTorch's ``torch.optim.LBFGS``): a quasi-Newton method with a limited memory.

All parameters are treated as one flat vector x with gradient g.  Each ``step(closure)``
runs up to ``max_iter`` iterations, each of which

1. picks a direction ``d = -H g``, where H approximates the inverse Hessian from the last
   ``history_size`` pairs ``s = x_{k+1} - x_k``, ``y = g_{k+1} - g_k`` by the two-loop
   recursion (Nocedal & Wright, Algorithm 7.4), started from ``H_0 = (s.y / y.y) I``.  A
   pair is stored only when ``s.y > 1e-10`` (the curvature condition keeps H positive
   definite).  The very first direction is ``-g``.
2. moves ``x <- x + t d``: with ``line_search_fn=None`` the step is fixed, ``t = lr`` (the
   first iteration ever uses ``min(1, 1/|g|_1) lr``); with ``line_search_fn="strong_wolfe"``
   t is chosen by a bracketing and zoom line search that ends at a point satisfying the
   strong Wolfe conditions ``f(x + t d) <= f(x) + c1 t g.d`` and ``|g(x + t d).d| <= c2 |g.d|``
   (c1 = 1e-4, c2 = 0.9), with cubic interpolation of the trial steps.
3. stops early when ``max|g| <= tolerance_grad``, when ``g.d > -tolerance_change`` (not a
   descent direction), when the step ``max|t d|`` or the change of the loss falls below
   ``tolerance_change``, or after ``max_eval`` evaluations of the closure.

The closure re-evaluates the loss and its gradients (``zero_grad(); loss.backward()``) and
returns the loss; it is called with gradients enabled.  The state (kept, as in PyTorch, in
``optimizer.state`` of the first parameter) carries the history across calls of ``step``,
so the same sequence of steps as PyTorch's follows from the same closure.
"""
from __future__ import annotations

import math

from varlens.core import array as B
from varlens.core import grad_mode as _gm
from varlens.optim.optimizer import Optimizer, _check_range, _xp
from varlens.core.tensor import Tensor

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clipped
    to ``bounds`` (default: the interval between x1 and x2); the midpoint when the cubic has
    no real minimiser."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search along d from the current point (loss f, gradient g, slope gtd = g.d < 0).

    ``evaluate(t)`` returns (loss, flat gradient) at x + t d and leaves x unchanged.
    Returns (loss, gradient, t, number of evaluations) at the accepted step.
    """
    xp = _xp(d)
    d_norm = float(xp.abs(d).max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    # phase 1: grow the step until an interval [t_prev, t] must contain an acceptable point
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # extrapolate: a cubic step between 1.01 t - 0.01 t_prev and 10 t
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_old = t
        t = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = t_old, f_new, g_new, gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
    if it == max_ls:
        br, br_f, br_g = [0.0, t], [f, f_new], [g, g_new]
    # phase 2: shrink the bracket by cubic interpolation until the Wolfe conditions hold
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    stuck = False
    while not done and it < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        # a trial too near an end of the bracket is moved inward (to 10% of its width) when
        # the previous trial was also near an end, or when it fell outside
        top, bot = max(br), min(br)
        margin = 0.1 * (top - bot)
        if min(top - t, t - bot) < margin:
            if stuck or t >= top or t <= bot:
                t = top - margin if abs(t - top) < abs(t - bot) else bot + margin
                stuck = False
            else:
                stuck = True
        else:
            stuck = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high], br_g[high], br_gtd[high] = br[low], br_f[low], br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new, gtd_new
    return br_f[low], br_g[low], br[low], evals


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's defaults: lr=1, max_iter=20, max_eval=max_iter*5//4,
    tolerance_grad=1e-7, tolerance_change=1e-9, history_size=100, line_search_fn=None).
    One parameter group only; ``step`` needs a closure."""

    _state_like_params = False      # its state holds flat vectors over all the parameters

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if max_eval is None and isinstance(max_iter, int) and not isinstance(max_iter, bool):
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups): got "
                             f"{len(self.param_groups)} groups, expected 1")
        self._params = self.param_groups[0]["params"]

    def _validate_group(self, group):
        super()._validate_group(group)
        for key in ("max_iter", "max_eval", "history_size"):
            v = group[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"LBFGS: {key} must be an integer >= 1, got {v!r}")
        _check_range("LBFGS", "tolerance_grad", group["tolerance_grad"], 0.0)
        _check_range("LBFGS", "tolerance_change", group["tolerance_change"], 0.0)
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError("LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{group['line_search_fn']!r}")

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups); "
                             "add_param_group cannot add a second group")
        super().add_param_group(param_group)

    # ---------------------------------------------------------------- flat views
    def _flat_grad(self):
        xp = _xp(self._params[0]._data)
        parts = [xp.zeros(p._data.size, dtype=p._data.dtype) if p.grad is None
                 else p.grad._data.reshape(-1) for p in self._params]
        return xp.concatenate(parts)

    def _add(self, t, d):
        """x <- x + t d, parameter by parameter."""
        off = 0
        for p in self._params:
            n = p._data.size
            p._data += t * d[off:off + n].reshape(p._data.shape)
            p._version[0] += 1
            off += n

    def _evaluate(self, closure):
        with _gm.enable_grad():
            return float(closure())

    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss at the starting point."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step: closure must be a callable that re-evaluates the model "
                            f"and returns the loss, got {type(closure).__name__}")
        # on a device the line search and the two-loop recursion read scalars on the host
        # (float(g.dot(d)), the stopping tests) as PyTorch's LBFGS does with .item()
        xp = _xp(self._params[0]._data)
        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history = group["line_search_fn"], group["history_size"]

        st = self.state[self._params[0]]
        st.setdefault("func_evals", 0)
        st.setdefault("n_iter", 0)
        with _gm.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        st["func_evals"] += 1
        g = self._flat_grad()
        if xp.abs(g).max() <= tol_grad:
            return orig_loss

        d = _arr(st.get("d"))
        t = _num(st.get("t"))
        dirs = [_arr(v) for v in st.get("old_dirs") or []]
        stps = [_arr(v) for v in st.get("old_stps") or []]
        ro = [_num(v) for v in st.get("ro") or []]
        H_diag = _num(st.get("H_diag"))
        prev_g = _arr(st.get("prev_flat_grad"))
        prev_loss = _num(st.get("prev_loss"))
        al = st.get("al")
        al = [None] * history if al is None else [None if a is None else _num(a) for a in al]

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = -g
                dirs, stps, ro, H_diag = [], [], [], 1.0
            else:
                y = g - prev_g
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(dirs) == history:
                        dirs.pop(0)
                        stps.pop(0)
                        ro.pop(0)
                    dirs.append(y)
                    stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y.dot(y))
                # two-loop recursion: d = -H g
                q = -g
                for i in range(len(dirs) - 1, -1, -1):
                    al[i] = float(stps[i].dot(q)) * ro[i]
                    q += (-al[i]) * dirs[i]
                d = q * H_diag
                for i in range(len(dirs)):
                    be = float(dirs[i].dot(d)) * ro[i]
                    d += (al[i] - be) * stps[i]
            prev_g = g.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / float(xp.abs(g).sum())) * lr if st["n_iter"] == 1 else lr
            gtd = float(g.dot(d))
            if gtd > -tol_change:
                break
            ls_evals = 0
            if line_search is not None:
                x0 = [p._data.copy() for p in self._params]

                def evaluate(step, _d=d, _x0=x0):
                    self._add(step, _d)
                    f_new = self._evaluate(closure)
                    g_new = self._flat_grad()
                    for p, a in zip(self._params, _x0):
                        p._data[...] = a
                    return f_new, g_new

                loss, g, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, g, gtd,
                                                     max_ls=max_eval - evals)
                self._add(t, d)
                opt_cond = xp.abs(g).max() <= tol_grad
            else:
                self._add(t, d)
                opt_cond = False
                if n_iter != max_iter:     # the last iteration's loss is not needed
                    loss = self._evaluate(closure)
                    g = self._flat_grad()
                    opt_cond = xp.abs(g).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if xp.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        st["d"] = Tensor._make(d)
        st["t"] = t
        st["old_dirs"] = [Tensor._make(v) for v in dirs]
        st["old_stps"] = [Tensor._make(v) for v in stps]
        st["ro"] = ro
        st["H_diag"] = H_diag
        st["prev_flat_grad"] = Tensor._make(prev_g)
        st["prev_loss"] = prev_loss
        if st["n_iter"] > 1 or "al" in st:
            st["al"] = al
        return orig_loss


def _arr(v):
    """A state entry as a NumPy array (it may be a varlens or a torch-converted Tensor)."""
    if v is None:
        return None
    return v._data if isinstance(v, Tensor) else B.xp.asarray(v)


def _num(v):
    if v is None:
        return None
    if isinstance(v, Tensor):
        return float(v._data)
    return float(v)
