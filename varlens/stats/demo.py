"""``python -m varlens.stats.demo --out DIR``: the LLN and CLT figures of seed 003 §3.1
(see :mod:`varlens.stats.lln_clt`)."""
from varlens.stats.lln_clt import main

if __name__ == "__main__":
    raise SystemExit(main())
