"""torch.backends.opt_einsum: varlens's einsum chooses its own contraction order (NumPy's
``optimize``); the switches can be set and change nothing."""
enabled = False
strategy = None


def is_available():
    return False
