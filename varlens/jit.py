"""torch.jit, answered for varlens: TorchScript compilation is a documented no-op.

TorchScript compiles a module or function to a graph that runs without Python.  varlens always
runs eagerly in Python, so ``script`` and ``trace`` return their argument unchanged (a scripted
model computes exactly what the eager one does, so a program that scripts for speed or
deployment still gives the same numbers).  The decorators (``ignore``, ``unused``, ``export``,
``interface``) return what they decorate; ``is_scripting()`` and ``is_tracing()`` are False.
``save`` and ``load`` of a TorchScript archive are not supported (there is no compiled graph to
write): they raise NotImplementedError pointing at ``varlens.save(model.state_dict(), path)``.
"""
import typing as _typing

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface", "is_scripting",
           "is_tracing", "annotate", "Final", "save", "load", "freeze", "optimize_for_inference",
           "ScriptModule", "ScriptFunction", "fork", "wait"]

Final = _typing.Final


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Return ``obj`` (a module, function or class) unchanged: varlens runs it eagerly."""
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """Return ``func`` unchanged: varlens does not record a trace (the eager call computes the same)."""
    return func


def trace_module(mod, inputs=None, *args, **kwargs):
    return mod


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


def ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` and ``@torch.jit.ignore(drop=True)``: the function itself."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def is_scripting():
    """False: varlens never runs code under TorchScript."""
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


def fork(func, *args, **kwargs):
    """Run ``func`` now (varlens has no TorchScript futures); ``wait`` returns its result."""
    return func(*args, **kwargs)


def wait(future):
    return future


class ScriptModule:
    """Stand-in type so ``isinstance(m, torch.jit.ScriptModule)`` is False for every varlens module."""


class ScriptFunction:
    """Stand-in type so ``isinstance(f, torch.jit.ScriptFunction)`` is False."""


def _no_archive(what):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"varlens.jit.{what}: TorchScript archives are not supported (varlens does not compile models; "
            "jit.script returns the module unchanged). Save and load the weights with "
            "varlens.save(model.state_dict(), path) / model.load_state_dict(varlens.load(path))")
    refuse.__name__ = what
    refuse.__varlens_unsupported__ = True
    return refuse


save = _no_archive("save")
load = _no_archive("load")
