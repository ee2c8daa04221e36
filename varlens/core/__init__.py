"""varlens.core: the ground floor.  Imports NumPy/SciPy and itself only.

Lowest first: ``arg_rules`` (``@torch_args``, the mark of how a public function takes torch's
arguments; imports nothing), ``dtypes`` (dtype objects, default dtype, promotion, finfo/iinfo), ``array`` (the
array namespace ``xp``, BLAS routing, cached constants, ``sum_to``), ``grad_mode``, ``tensor``
(Tensor: data, grad, the edge to the Function that made it), ``function`` (the Function base),
``primitives`` (the array-or-Tensor helpers every backward is written in), ``engine`` (the
backward loop, ``grad``).  Each module imports only the ones before it, with one documented
exception: ``Tensor.backward`` calls up into the engine (imported at call time).
"""
