"""torch.onnx, answered for varlens: ONNX export is not supported.

PyTorch exports a model by tracing its ops into an ONNX graph.  A varlens model is Python code
over NumPy arrays with no op registry that maps to ONNX operators, so ``export`` raises
NotImplementedError saying so (the same refusal ``dynamo_export`` gives).  ``is_in_onnx_export()``
is False, which is what model code that branches on it needs.
"""
__all__ = ["export", "dynamo_export", "is_in_onnx_export", "OnnxExporterError"]


class OnnxExporterError(RuntimeError):
    """PyTorch's exception type for a failed export."""


def _refuse(what):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"varlens.onnx.{what}: exporting to ONNX is not supported. varlens runs models as Python over "
            "NumPy arrays and has no mapping from its ops to ONNX operators; save the weights with "
            "varlens.save(model.state_dict(), path) (they load into the same architecture in PyTorch, whose "
            "torch.onnx.export can then write the ONNX file)")
    refuse.__name__ = what
    refuse.__varlens_unsupported__ = True
    return refuse


export = _refuse("export")
dynamo_export = _refuse("dynamo_export")


def is_in_onnx_export():
    """False: varlens never runs a model under an ONNX export."""
    return False
