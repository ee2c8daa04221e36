"""varlens.lens: predict, measure and compare the second moment of every activation and gradient."""
