"""varlens.autograd: the tape (Function), the backward engine, grad modes and gradient checks."""
from varlens.autograd.engine import backward, grad
from varlens.autograd.function import Function
from varlens.autograd.gradcheck import GradcheckReport, gradcheck, gradgradcheck
from varlens.autograd.grad_mode import (detect_anomaly, enable_grad, inference_mode,
                                        is_anomaly_enabled, is_grad_enabled, no_grad,
                                        set_detect_anomaly, set_grad_enabled)

__all__ = ["Function", "backward", "grad", "gradcheck", "gradgradcheck", "GradcheckReport",
           "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]
