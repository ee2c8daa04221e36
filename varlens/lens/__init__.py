"""varlens.lens: predict, measure and compare the second moment of every activation and gradient.

``Lens(model)`` measures (probes.py), ``compare.compare(lens)`` sets the measurements beside the
propagation rules' predictions (rules.py, compare.py), ``Lens.report()`` / ``report.table``
print them; see docs/lens.md.
"""
from varlens.lens.probes import Lens  # noqa: F401
from varlens.lens.report import table, to_json, write_json  # noqa: F401
