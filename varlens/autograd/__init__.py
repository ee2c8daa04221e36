"""varlens.autograd: the tape (Function), the backward engine, grad modes and gradient checks."""
from varlens.core.engine import backward, grad
from varlens.core.function import Function
from varlens.autograd.gradcheck import GradcheckReport, gradcheck, gradgradcheck
from varlens.core.grad_mode import (detect_anomaly, enable_grad, inference_mode,
                                        is_anomaly_enabled, is_grad_enabled, no_grad,
                                        set_detect_anomaly, set_grad_enabled)

from varlens.core.grad_mode import is_inference_mode_enabled  # noqa: E402
from varlens.autograd import functional  # noqa: E402,F401  (jacobian, hessian, vjp, jvp, hvp, vhp)
from varlens.autograd.explain import Explanation, explain  # noqa: E402  (backprop, step by step)
from varlens.autograd.gradcheck_report import LearnerReport, check_gradients  # noqa: E402  (CS231n-style)
from varlens.core.tensor import Tensor, tensor


class _VariableMeta(type):
    def __call__(cls, data=None, requires_grad=False, volatile=False):
        t = data.detach() if isinstance(data, Tensor) else tensor([] if data is None else data)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """torch.autograd.Variable (deprecated in torch, still common in old scripts):
    ``Variable(t, requires_grad=True)`` returns a tensor sharing t's data, outside t's graph."""


__all__ = ["explain", "Explanation", "check_gradients", "LearnerReport", "Variable", "functional", "is_inference_mode_enabled", "Function", "backward", "grad", "gradcheck", "gradgradcheck", "GradcheckReport",
           "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]
