"""SGD: stochastic gradient descent with optional momentum, Nesterov and weight decay.

Two momentum forms (docs/conventions.md, "Optimisers and schedules"):

* ``momentum_style="heavy_ball"`` (default, PyTorch's and seed 003 §4.2.1's eq. 4.2.1):
  the buffer sums past gradients, ``v <- mu v + (1 - dampening) g`` (the first step sets
  ``v = g``), and the step is ``p <- p - lr v``.
* ``momentum_style="ema"`` (seed 004 §B.1.1, Definition 7): the buffer is an exponential
  moving average ``M <- gamma M + (1 - gamma) g`` started at ``M_0 = 0``, and the step is
  ``p <- p - lr M``.  Here ``momentum`` plays the role of the notes' gamma.  Because
  ``M_t = (1 - gamma) v_t`` at every step, EMA momentum with learning rate ``lr`` gives
  exactly the iterates of heavy-ball momentum with learning rate ``lr (1 - gamma)``.
"""
from __future__ import annotations

from varlens.optim.optimizer import Optimizer, _check_range, _no_differentiable
from varlens.core.array import xp as _np
from varlens.core.tensor import Tensor
from varlens.ops.kernels import optim as _KO

__all__ = ["SGD"]

_STYLES = ("heavy_ball", "ema")


class SGD(Optimizer):
    """Gradient descent ``p <- p - lr d`` where d is the (momentum-filtered) gradient.

    Args (PyTorch's names and defaults):
        lr: learning rate (default 1e-3).
        momentum: mu in [0, 1) (default 0: plain SGD).
        dampening: the heavy-ball buffer adds ``(1 - dampening) g`` after the first step.
        weight_decay: coupled L2 penalty, ``g <- g + weight_decay p`` (the gradient of
            ``weight_decay/2 |p|^2``; seed 003 Remark 4.1.1 writes the penalty as ``lambda |p|^2``,
            whose gradient is ``2 lambda p``).
        nesterov: step along ``g + mu v`` instead of ``v``.
        maximize: ascend instead of descend.
        momentum_style: "heavy_ball" (PyTorch) or "ema" (seed 004's running average; varlens only).
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None,
                 momentum_style="heavy_ball"):
        _no_differentiable("SGD", differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        if momentum_style != "heavy_ball":   # stored only when used: defaults, param_groups and
            defaults["momentum_style"] = momentum_style   # state_dict keys stay exactly PyTorch's
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("SGD", "momentum", group["momentum"], 0.0, 1.0, hi_open=True)
        _check_range("SGD", "weight_decay", group["weight_decay"], 0.0)
        _check_range("SGD", "dampening", group["dampening"], 0.0, 1.0)
        style = group.get("momentum_style", "heavy_ball")
        if style not in _STYLES:
            raise ValueError(f"SGD: momentum_style must be one of {_STYLES}, got {style!r}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}")
        if style == "ema" and group["dampening"] != 0:
            raise ValueError("SGD: momentum_style='ema' already weights the new gradient by "
                             f"(1 - momentum); dampening must be 0, got {group['dampening']}")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure's loss if given."""
        loss = self._closure(closure)
        state = self.state
        for group in self.param_groups:
            lr = group["lr"]
            mu = group["momentum"]
            damp = group["dampening"]
            wd = group["weight_decay"]
            nesterov = group["nesterov"]
            maximize = group["maximize"]
            ema = group.get("momentum_style") == "ema"
            if mu != 0 and not (wd or nesterov or maximize or ema or damp):
                self._heavy_ball(group["params"], lr, mu, state)
                continue
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                d = g._data
                w = p._data
                if maximize:
                    d = -d
                if wd != 0:
                    d = d + wd * w
                if mu != 0:
                    st = state[p]
                    buf = st.get("momentum_buffer")
                    if buf is None:
                        # heavy ball starts at v_1 = g; the EMA at M_1 = (1 - gamma) g (M_0 = 0)
                        b = (1 - mu) * d if ema else d.copy()
                        st["momentum_buffer"] = Tensor._make(b)
                    else:
                        b = buf._data
                        b *= mu
                        if ema:
                            b += (1 - mu) * d
                        elif damp != 0:
                            b += (1 - damp) * d
                        else:
                            b += d
                    if nesterov:
                        d = ((1 - mu) * d + mu * b) if ema else (d + mu * b)
                    else:
                        d = b
                w -= lr * d
                p._version[0] += 1
        return loss

    @staticmethod
    def _heavy_ball(params, lr, mu, state):
        """The common case (heavy-ball momentum, nothing else): v <- mu v + g; p <- p - lr v,
        with the buffer updated in place: one compiled pass for float32 (ops/kernels/optim.py),
        else NumPy with one temporary per parameter."""
        mul = _np.multiply
        fused = lr.__class__ is float and mu.__class__ is float
        for p in params:
            g = p.grad
            if g is None:
                continue
            d = g._data
            st = state[p]
            buf = st.get("momentum_buffer")
            if buf is None:
                b = d.copy()
                st["momentum_buffer"] = Tensor._make(b)
                w = p._data
            else:
                b = buf._data
                w = p._data
                if fused and _KO.sgd_momentum_step(w, d, b, lr, mu):
                    p._version[0] += 1
                    continue
                b *= mu
                b += d
            w -= mul(b, lr)
            p._version[0] += 1
