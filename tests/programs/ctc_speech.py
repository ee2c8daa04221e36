"""A CTC sequence recogniser in the style of the torchaudio ASR tutorials and the deepspeech.pytorch
/ "building an end-to-end speech recognition model" blog post (AssemblyAI): synthetic
"spectrograms" in which each character of a random word is a noisy frequency pattern lasting a
random number of frames; a CNN front end (Conv2d + GELU + LayerNorm over features), a
bidirectional GRU, a linear classifier, F.log_softmax(dim=2) transposed to (T, N, C) for
nn.CTCLoss(blank=0, zero_infinity=True) with per-utterance input/target lengths, padded
batches from pad_sequence in a collate_fn, AdamW + OneCycleLR, and greedy decoding (argmax,
collapse repeats, drop blanks) scored by an edit distance."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=7)
parser.add_argument('--epochs', type=int, default=6)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

N_CHARS, N_FEATS = 6, 16            # labels 1..6, 0 is the CTC blank
PATTERNS = np.random.default_rng(5).normal(0, 1, (N_CHARS + 1, N_FEATS)).astype(np.float32)


class SyntheticSpeech(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.items = []
        for _ in range(n):
            word = rng.integers(1, N_CHARS + 1, rng.integers(2, 6))
            frames = []
            for c in word:
                frames += [PATTERNS[c]] * int(rng.integers(2, 5))
                frames += [PATTERNS[0]] * int(rng.integers(0, 2))     # short silences
            spec = np.stack(frames) + rng.normal(0, 0.6, (len(frames), N_FEATS)).astype(np.float32)
            self.items.append((torch.from_numpy(spec.astype(np.float32)), torch.from_numpy(word.astype(np.int64))))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def data_processing(data):
    spectrograms, labels, input_lengths, label_lengths = [], [], [], []
    for spec, label in data:
        spectrograms.append(spec)
        labels.append(label)
        input_lengths.append(spec.shape[0])
        label_lengths.append(len(label))
    spectrograms = pad_sequence(spectrograms, batch_first=True).unsqueeze(1)  # (B, 1, T, F)
    labels = pad_sequence(labels, batch_first=True)
    return spectrograms, labels, input_lengths, label_lengths


class CNNLayerNorm(nn.Module):
    """Layer normalization built for cnns input"""

    def __init__(self, n_feats):
        super(CNNLayerNorm, self).__init__()
        self.layer_norm = nn.LayerNorm(n_feats)

    def forward(self, x):
        # x (batch, channel, feature, time)
        x = x.transpose(2, 3).contiguous()  # (batch, channel, time, feature)
        x = self.layer_norm(x)
        return x.transpose(2, 3).contiguous()  # (batch, channel, feature, time)


class ResidualCNN(nn.Module):
    def __init__(self, in_channels, out_channels, kernel, stride, dropout, n_feats):
        super(ResidualCNN, self).__init__()
        self.cnn1 = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.cnn2 = nn.Conv2d(out_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.layer_norm1 = CNNLayerNorm(n_feats)
        self.layer_norm2 = CNNLayerNorm(n_feats)

    def forward(self, x):
        residual = x  # (batch, channel, feature, time)
        x = self.layer_norm1(x)
        x = F.gelu(x)
        x = self.dropout1(x)
        x = self.cnn1(x)
        x = self.layer_norm2(x)
        x = F.gelu(x)
        x = self.dropout2(x)
        x = self.cnn2(x)
        x += residual
        return x  # (batch, channel, feature, time)


class SpeechRecognitionModel(nn.Module):
    def __init__(self, n_class, n_feats, rnn_dim=48, dropout=0.1):
        super(SpeechRecognitionModel, self).__init__()
        self.cnn = nn.Conv2d(1, 8, 3, stride=1, padding=3 // 2)
        self.rescnn_layers = nn.Sequential(ResidualCNN(8, 8, kernel=3, stride=1, dropout=dropout, n_feats=n_feats))
        self.fully_connected = nn.Linear(n_feats * 8, rnn_dim)
        self.birnn = nn.GRU(input_size=rnn_dim, hidden_size=rnn_dim, num_layers=1, batch_first=True,
                            bidirectional=True)
        self.layer_norm = nn.LayerNorm(rnn_dim)
        self.classifier = nn.Sequential(nn.Linear(rnn_dim * 2, rnn_dim), nn.GELU(), nn.Dropout(dropout),
                                        nn.Linear(rnn_dim, n_class))

    def forward(self, x):
        x = x.transpose(2, 3)           # (batch, 1, feature, time)
        x = self.cnn(x)
        x = self.rescnn_layers(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # (batch, feature, time)
        x = x.transpose(1, 2)  # (batch, time, feature)
        x = self.fully_connected(x)
        x, _ = self.birnn(F.gelu(self.layer_norm(x)))
        x = self.classifier(x)
        return x


def GreedyDecoder(output, labels, label_lengths, blank_label=0, collapse_repeated=True):
    arg_maxes = torch.argmax(output, dim=2)
    decodes, targets = [], []
    for i, args_ in enumerate(arg_maxes):
        decode = []
        targets.append(labels[i][:label_lengths[i]].tolist())
        for j, index in enumerate(args_):
            if index != blank_label:
                if collapse_repeated and j != 0 and index == args_[j - 1]:
                    continue
                decode.append(index.item())
        decodes.append(decode)
    return decodes, targets


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[len(b)]


train_loader = DataLoader(SyntheticSpeech(320, 0), batch_size=16, shuffle=True, collate_fn=data_processing)
test_loader = DataLoader(SyntheticSpeech(80, 1), batch_size=40, shuffle=False, collate_fn=data_processing)

model = SpeechRecognitionModel(N_CHARS + 1, N_FEATS).to(device)
optimizer = torch.optim.AdamW(model.parameters(), 3e-3)
criterion = nn.CTCLoss(blank=0, zero_infinity=True).to(device)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, steps_per_epoch=int(len(train_loader)),
                                                epochs=args.epochs, anneal_strategy='linear')
print('Num Model Parameters', sum([param.nelement() for param in model.parameters()]))

for epoch in range(1, args.epochs + 1):
    model.train()
    for batch_idx, _data in enumerate(train_loader):
        spectrograms, labels, input_lengths, label_lengths = _data
        spectrograms, labels = spectrograms.to(device), labels.to(device)
        optimizer.zero_grad()
        output = model(spectrograms)  # (batch, time, n_class)
        output = F.log_softmax(output, dim=2)
        output = output.transpose(0, 1)  # (time, batch, n_class)
        loss = criterion(output, labels, input_lengths, label_lengths)
        loss.backward()
        optimizer.step()
        scheduler.step()
    print(f"epoch {epoch}: last batch CTC loss {loss.item():.4f}")

model.eval()
test_loss, cer = 0, []
with torch.no_grad():
    for spectrograms, labels, input_lengths, label_lengths in test_loader:
        output = F.log_softmax(model(spectrograms), dim=2)
        loss = criterion(output.transpose(0, 1), labels, torch.tensor(input_lengths), torch.tensor(label_lengths))
        # the same loss per utterance, summed, through the functional form
        per = F.ctc_loss(output.transpose(0, 1), labels, input_lengths, label_lengths, reduction='none')
        assert torch.allclose((per / torch.tensor(label_lengths)).mean(), loss, rtol=1e-4)
        test_loss += loss.item() / len(test_loader)
        decoded_preds, decoded_targets = GreedyDecoder(output, labels, label_lengths)
        for p, t in zip(decoded_preds, decoded_targets):
            cer.append(edit_distance(p, t) / len(t))
print(f"test CTC loss {test_loss:.4f}  character error rate {np.mean(cer):.3f}")
print(f"final_loss: {test_loss:.6f}")
