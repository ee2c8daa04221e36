"""varlens.nn.utils: gradient clipping and parameter/vector conversion (PyTorch's names)."""
from varlens.nn.utils.clip_grad import (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                                        get_total_norm)
from varlens.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters"]

# weight/spectral norm (hook and parametrization forms), BN fusion, functional_call (torch's names)
from varlens.nn.utils.weight_norm import (remove_spectral_norm, remove_weight_norm, spectral_norm,  # noqa: E402
                                          weight_norm)
from varlens.nn.utils.fusion import (clip_grad_norm, convert_conv2d_weight_memory_format,  # noqa: E402
                                     convert_conv3d_weight_memory_format, fuse_conv_bn_eval,
                                     fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights,
                                     skip_init)
from varlens.nn.utils import parametrizations, parametrize, rnn, stateless  # noqa: E402,F401

__all__ += ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "fuse_conv_bn_eval",
            "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init",
            "clip_grad_norm", "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]
