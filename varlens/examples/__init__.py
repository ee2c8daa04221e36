"""Small runnable scripts, one idea of the notes each (python -m varlens.examples.NAME)."""
