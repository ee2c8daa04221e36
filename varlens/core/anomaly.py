"""What ``autograd.detect_anomaly()`` records and reports, with PyTorch's semantics.

In anomaly mode every recorded op notes where it was created: the chain of ``nn.Module``s whose
``forward`` was running (as a dotted path from the outermost one, e.g.
``Net.encoder.layers.0.self_attn``) and the line of user code.  The backward pass then checks
every gradient an op returns for NaN (as PyTorch does; Inf values and -inf masks in the forward
pass, such as a causal mask before softmax, are not anomalies) and raises RuntimeError naming the
op and where its forward ran.

Modules are recognised by duck typing (an object with a ``_modules`` dict and a ``forward``), so
this core module imports nothing from varlens.nn.
"""
from __future__ import annotations

import os
import sys

from varlens.core.array import xp as _np

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../varlens


def _is_module(obj):
    return isinstance(getattr(obj, "_modules", None), dict) and callable(getattr(obj, "forward", None))


def _child_name(parent, child):
    for name, m in parent._modules.items():
        if m is child:
            return name
    named = getattr(parent, "named_modules", None)
    if callable(named):
        for name, m in named():
            if m is child and name:
                return name
    return None


def forward_site(op_name):
    """A short description of where the op being recorded was called: module path and user line."""
    f = sys._getframe(2)
    modules, user_line = [], None
    while f is not None:
        code = f.f_code
        if user_line is None and not code.co_filename.startswith(_PKG):
            user_line = f"{code.co_filename}:{f.f_lineno} in {code.co_name}"
        if code.co_name == "forward":
            obj = f.f_locals.get("self")
            if _is_module(obj) and (not modules or modules[-1] is not obj):
                modules.append(obj)
        f = f.f_back
    modules.reverse()   # outermost first
    parts = []
    for i, m in enumerate(modules):
        if i == 0:
            parts.append(type(m).__name__)
        else:
            parts.append(_child_name(modules[i - 1], m) or type(m).__name__)
    where = f"the forward op {op_name}"
    if parts:
        where += f" in module {'.'.join(parts)} ({type(modules[-1]).__name__})"
    if user_line:
        where += f", called from {user_line}"
    return where


def check_backward(grad, node):
    """Raise RuntimeError when the gradient ``node``'s backward returned holds NaN (anomaly mode)."""
    a = getattr(grad, "_data", grad)
    if getattr(a, "dtype", None) is not None and a.dtype.kind in "fc" and bool(_np.isnan(a).any()):
        name = type(node).__name__
        site = getattr(node, "_anomaly_site", None) or f"the forward op {name}"
        raise RuntimeError(f"Function '{name}Backward' returned nan values in its output (anomaly detected; "
                           f"created by {site})")
