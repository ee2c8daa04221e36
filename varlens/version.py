"""torch.version's fields, answered for varlens (a CPU-only NumPy framework)."""
__version__ = "0.1.0"   # varlens's own version (the package's), not PyTorch's
cuda = None             # no CUDA build: version gates such as `if torch.version.cuda:` take the CPU branch
hip = None
debug = False
git_version = "unknown"
