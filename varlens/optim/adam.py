"""Adam (and its decoupled-decay sibling AdamW): momentum plus per-weight RMS scaling.

With m_0 = v_0 = 0 and t counting steps (seed 004 §B.1.4, Definition 16; seed 003 §4.2.4):

    m <- beta1 m + (1 - beta1) g          v <- beta2 v + (1 - beta2) g^2
    m_hat = m / (1 - beta1^t)             v_hat = v / (1 - beta2^t)     (bias correction)
    p <- p - lr m_hat / (sqrt(v_hat) + eps)

The bias correction undoes the zero start: the running average of a constant c is
``c (1 - beta^t)`` (seed 004's [1, 1, 1] example with beta = 0.1 gives 0.9, 0.99, 0.999),
and dividing by ``1 - beta^t`` gives back c.

eps sits outside the root, as in PyTorch and seed 004 (B.30/Definition 16).  Seed 003's
eq. 4.2.4 puts it inside, ``sqrt(v_hat + eps)``: pass ``eps_inside_sqrt=True`` for that.
``weight_decay`` in Adam is coupled L2 (added to g, so it is rescaled by the adaptive
denominator); AdamW decouples it (seed 003 eq. 4.2.5): ``p <- (1 - lr wd) p`` first.
``amsgrad`` divides by the running maximum of v instead of v.
"""
from __future__ import annotations

from varlens.optim.optimizer import (Optimizer, _check_adam_group, _lerp_, _new_step,
                                     _no_differentiable, _step_count, _xp)
from varlens.core.tensor import Tensor
from varlens.ops.kernels import optim as _KO

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam (PyTorch's defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False).  ``decoupled_weight_decay=True`` makes it AdamW, as in PyTorch;
    ``eps_inside_sqrt=True`` is seed 003's variant (varlens only)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False,
                 eps_inside_sqrt=False):
        _no_differentiable(type(self).__name__, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas) if isinstance(betas, list) else betas, eps=eps,
                        weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        if eps_inside_sqrt:   # the notes' variant is stored only when used: the defaults, param_groups
            defaults["eps_inside_sqrt"] = True   # and state_dict keys stay exactly PyTorch's
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_adam_group(type(self).__name__, group)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
            decoupled, inside = group["decoupled_weight_decay"], group.get("eps_inside_sqrt", False)
            fused = (not (amsgrad or inside) and lr.__class__ is float    # the compiled update applies
                     and all(v.__class__ in (float, int) for v in (beta1, beta2, eps, wd)))
            for p in group["params"]:
                if p.grad is None:
                    continue
                w = p._data
                xp = _xp(w)        # the parameter's device: state and scratch live there
                st = self.state[p]
                if not st:
                    st["step"] = _new_step()
                    st["exp_avg"] = Tensor._make(xp.zeros_like(w))
                    st["exp_avg_sq"] = Tensor._make(xp.zeros_like(w))
                    if amsgrad:
                        st["max_exp_avg_sq"] = Tensor._make(xp.zeros_like(w))
                t = _step_count(st)
                g = p.grad._data
                if fused and _KO.adam_step(w, g, st["exp_avg"]._data, st["exp_avg_sq"]._data, lr, beta1,
                                           beta2, eps, t, wd, decoupled, maximize):
                    p._version[0] += 1   # float32: one compiled pass (ops/kernels/optim.py)
                    continue
                if maximize:
                    g = -g
                if wd != 0:
                    if decoupled:
                        w *= 1 - lr * wd
                    else:
                        g = g + wd * w
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                v = st["exp_avg_sq"]._data
                v *= beta2
                tmp = xp.multiply(g, 1 - beta2, out=xp.empty_like(w))  # one scratch array for every step
                # below (out= keeps it an array for a 0-d parameter, where NumPy would return a scalar)
                tmp *= g                         # addcmul's rounding: (value t1) t2
                v += tmp
                bc1 = 1 - beta1 ** t
                bc2 = 1 - beta2 ** t
                step_size = lr / bc1
                if amsgrad:
                    vmax = st["max_exp_avg_sq"]._data
                    xp.maximum(vmax, v, out=vmax)
                    v = vmax
                if inside:
                    xp.divide(v, bc2, out=tmp)
                    tmp += eps
                    xp.sqrt(tmp, out=tmp)
                else:
                    xp.sqrt(v, out=tmp)
                    tmp /= bc2 ** 0.5
                    tmp += eps
                xp.divide(m, tmp, out=tmp)       # addcdiv's rounding: value (t1 / t2)
                tmp *= step_size
                w -= tmp
                p._version[0] += 1
        return loss
