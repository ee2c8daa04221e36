"""Run a PyTorch program with ``import torch`` bound to varlens (or to PyTorch itself).

    python tests/programs/run_as.py varlens tests/programs/mnist.py [program args]
    python tests/programs/run_as.py torch   tests/programs/mnist.py [program args]

With ``varlens`` a meta-path finder answers every ``import torch`` / ``import torch.X.Y`` /
``from torch.X import Y`` with the module ``varlens`` / ``varlens.X.Y``, so the program text is
run unchanged, exactly as a user who aliased the package would run it.  With ``torch`` the program
runs on PyTorch.  The program is executed as ``__main__`` (its ``if __name__ == '__main__'`` block runs).
"""
import importlib
import os
import importlib.abc
import importlib.util
import runpy
import sys


class _TorchIsVarlens(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve ``torch[.sub]`` to the already-importable ``varlens[.sub]`` module object."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        target = "varlens" + spec.name[len("torch"):]
        module = importlib.import_module(target)   # ModuleNotFoundError names the varlens path
        self._specs = getattr(self, "_specs", {})
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        # the varlens module is already executed; the import system has just stamped the alias's
        # spec on it: give it its own back so varlens's own lazy imports keep their real names
        module.__spec__ = self._specs.pop(module.__spec__.name)


def main(argv):
    if len(argv) < 3 or argv[1] not in ("varlens", "torch"):
        raise SystemExit(__doc__)
    if argv[1] == "varlens":
        sys.meta_path.insert(0, _TorchIsVarlens())
    program = argv[2]
    sys.argv = [program] + argv[3:]
    runpy.run_path(program, run_name="__main__")
    if argv[1] == "varlens" and os.environ.get("VARLENS_SIMULATED_CUDA"):
        # how much the program put on the simulated CUDA device (tests/test_device_programs.py)
        from varlens.core import simulated_cuda
        print(f"device_peak_bytes: {simulated_cuda.allocated[1]}")


if __name__ == "__main__":
    main(sys.argv)
