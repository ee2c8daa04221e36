"""varlens.text: decoding (greedy, sampling, top-k, top-p, beam), BLEU, synthetic
transduction tasks and pictures for sequence models."""
from varlens.text.bleu import corpus_bleu, modified_precision, ngrams, sentence_bleu  # noqa: F401
from varlens.text.decoding import (beam_search, greedy_decode, sample_decode, sample_logits,  # noqa: F401
                                   softmax_with_temperature, top_k_filter, top_p_filter)
from varlens.text.tasks import CharSeqVocab, date_pairs, reverse_pairs  # noqa: F401
