"""``python -m varlens.info.bench [FILE] [--length N] [--order K]``: bits per character of the
arithmetic coder + PPM byte model against gzip -9, bz2 -9 and xz -9e on the same text, with a
full decode to confirm the round trip.  ``--kjv-test --model lstm|mix --checkpoint PATH``:
the trained char-LSTM (or its mixture with PPM) on the held-out KJV text.  Default text: the English text of Python's
``pydoc_data.topics`` (all 466 kB).  See docs/info.md for the measured figures."""
from varlens.info.compress import main

if __name__ == "__main__":
    raise SystemExit(main())
