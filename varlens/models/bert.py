"""A small BERT-style encoder (seed 003 §8.1; Devlin et al. 2019): masked-language-model
pre-training, then fine-tuning for sequence classification.

Model: token + learned position embeddings -> LayerNorm -> post-LN Transformer encoder (GELU,
as BERT) -> (a) an MLM head (Linear, GELU, LayerNorm, then logits through the tied token
embedding) and (b) a classifier on the first token ([CLS]) through a tanh "pooler".

Pre-training, fine-tuning and the data they read are in varlens.text.mlm.

Masking (``varlens.text.mlm.mask_tokens``): each maskable token is chosen with probability 0.15; a chosen
token becomes [MASK] with probability 0.8, a uniformly random token with 0.1, and stays
unchanged with 0.1 (so per token: 0.12, 0.015, 0.015, as the inventory checks).  Only the
chosen positions carry a label; the rest get ``ignore_index`` -100, which cross_entropy skips.

Fine-tuning task (``shuffled_verse_task``): is a line of the corpus a real verse, or the
same words in a random order?  Word counts match exactly, so a model must know English
word order to answer; MLM pre-training is what teaches it.
"""
from __future__ import annotations

import varlens as vl
from varlens import nn
from varlens.nn import functional as F

SPECIALS = ("<pad>", "<cls>", "<mask>")
PAD, CLS, MASK = 0, 1, 2


class BERT(nn.Module):
    def __init__(self, vocab_size, max_len=64, d_model=64, n_layer=2, n_head=4, dim_feedforward=None,
                 dropout=0.0, num_classes=2, norm_first=False):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, d_model)
        self.emb_norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, n_head, dim_feedforward or 4 * d_model, dropout,
                                           activation="gelu", batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, n_layer, norm=nn.LayerNorm(d_model) if norm_first else None)
        self.mlm_dense = nn.Linear(d_model, d_model)
        self.mlm_norm = nn.LayerNorm(d_model)
        self.mlm_bias = nn.Parameter(vl.zeros(vocab_size))
        self.pooler = nn.Linear(d_model, d_model)
        self.classifier = nn.Linear(d_model, num_classes)
        self.max_len = max_len
        for m in self.modules():  # BERT's init: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def encode(self, ids):
        """ids (B, T) -> hidden states (B, T, d); padding positions are masked as keys."""
        B, T = ids.shape
        if T > self.max_len:
            raise ValueError(f"BERT: sequence length {T} exceeds max_len {self.max_len}")
        x = self.emb_norm(self.tok(ids) + self.pos(vl.arange(T)))
        pad = vl.tensor(ids.numpy() == PAD)
        return self.encoder(self.drop(x), src_key_padding_mask=pad)

    def mlm_logits(self, h):
        z = self.mlm_norm(F.gelu(self.mlm_dense(h)))
        return vl.matmul(z, self.tok.weight.T) + self.mlm_bias

    def mlm_loss(self, inputs, labels):
        logits = self.mlm_logits(self.encode(inputs))
        V = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)

    def forward(self, ids):
        """Classification logits from the [CLS] position."""
        h = self.encode(ids)
        return self.classifier(vl.tanh(self.pooler(h[:, 0])))
