"""varlens.ops.nn: the fused layer ops, one Function per layer with a closed-form backward (and a
``composite`` from smaller ops for second derivatives): linear, norm, loss, embedding, dropout,
attention, conv, pool, upsample, pad, rnn.  nn.functional and nn modules call these."""
