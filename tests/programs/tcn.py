"""A temporal convolutional network (locuslab/TCN's tcn.py, the adding-problem and copy-memory
benchmarks; here its sequence-modelling use, next-step prediction of a nonlinear autoregressive
series, a smooth task without the adding problem's plateau) with dilated causal Conv1d blocks, padding trimmed by a Chomp1d module, residual
1x1 downsampling, and weight normalisation both ways: the legacy nn.utils.weight_norm (weight_g /
weight_v, removed again with remove_weight_norm before saving) and the new
nn.utils.parametrizations.weight_norm (parametrizations.weight.original0/1), trained side by
side.  Also: nn.init.normal_ on weight_v, Adam, gradient clipping by
clip_grad_norm_ with its returned total norm, and StepLR."""
import argparse
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm
from torch.nn.utils import parametrizations

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=1111)
parser.add_argument('--steps', type=int, default=150)
parser.add_argument('--seq_len', type=int, default=32)
args = parser.parse_args()
torch.manual_seed(args.seed)


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2, new_api=False):
        super(TemporalBlock, self).__init__()
        wn = parametrizations.weight_norm if new_api else weight_norm
        self.conv1 = wn(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                  stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = wn(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                  stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.new_api = new_api
        self.init_weights()

    def init_weights(self):
        if self.new_api:
            self.conv1.parametrizations.weight.original1.data.normal_(0, 0.01)
            self.conv2.parametrizations.weight.original1.data.normal_(0, 0.01)
        else:
            self.conv1.weight_v.data.normal_(0, 0.01)
            self.conv2.weight_v.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2, new_api=False):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout, new_api=new_api)]

        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout, new_api=False):
        super(TCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout,
                                   new_api=new_api)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)                                   # (N, C, L)
        return self.linear(y1.transpose(1, 2)).squeeze(-1)  # a prediction at every step: (N, L)


def data_generator(N, seq_length, rng):
    """x_t = 0.6 x_{t-1} - 0.4 x_{t-4} + 0.5 tanh(x_{t-2} x_{t-3}) + 0.1 noise; the input is
    x_0..x_{L-1} (one channel), the target x_1..x_L (the next value at every step)."""
    x = np.zeros((N, seq_length + 1 + 8))
    x[:, :4] = rng.normal(0, 1, (N, 4))
    for t in range(4, x.shape[1]):
        x[:, t] = 0.6 * x[:, t - 1] - 0.4 * x[:, t - 4] + 0.5 * np.tanh(x[:, t - 2] * x[:, t - 3]) \
            + 0.1 * rng.normal(0, 1, N)
    x = x[:, 8:]
    X = x[:, None, :-1]
    Y = x[:, 1:]
    return torch.tensor(X, dtype=torch.float32), torch.tensor(Y, dtype=torch.float32)


rng = np.random.default_rng(0)
X_train, Y_train = data_generator(1000, args.seq_len, rng)
X_test, Y_test = data_generator(200, args.seq_len, rng)
channels = [16] * 3         # receptive field 1 + 2 * (1 + 2 + 4) = 15
batch_size = 32

results = []
for new_api in (False, True):
    model = TCN(1, 1, channels, kernel_size=2, dropout=0.0, new_api=new_api)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)
    names = [n for n, _ in model.named_parameters()]
    if new_api:
        assert 'tcn.network.0.conv1.parametrizations.weight.original0' in names, names[:4]
    else:
        assert 'tcn.network.0.conv1.weight_g' in names, names[:4]
    model.train()
    for step in range(args.steps):
        i = (step * batch_size) % (X_train.size(0) - batch_size)
        x, y = X_train[i:i + batch_size], Y_train[i:i + batch_size]
        optimizer.zero_grad()
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % 40 == 0:
            print(f"{'parametrizations' if new_api else 'weight_norm'} step {step}: loss {loss.item():.5f} "
                  f"grad norm {float(total_norm):.3f}")
    model.eval()
    with torch.no_grad():
        test_loss = F.mse_loss(model(X_test), Y_test).item()
    # export without the reparametrisation, as one does before deployment
    if new_api:
        from torch.nn.utils import parametrize
        for m in model.modules():
            if isinstance(m, nn.Conv1d) and parametrize.is_parametrized(m):
                parametrize.remove_parametrizations(m, 'weight')
    else:
        for m in model.modules():
            if isinstance(m, nn.Conv1d) and hasattr(m, 'weight_g'):
                torch.nn.utils.remove_weight_norm(m)
    assert not any('weight_g' in k or 'original0' in k for k in model.state_dict())
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    plain = TCN(1, 1, channels, kernel_size=2, dropout=0.0)
    for m in plain.modules():
        if isinstance(m, nn.Conv1d) and hasattr(m, 'weight_g'):
            torch.nn.utils.remove_weight_norm(m)
    plain.load_state_dict(torch.load(buf, weights_only=True))
    plain.eval()
    with torch.no_grad():
        again = F.mse_loss(plain(X_test), Y_test).item()
    assert abs(again - test_loss) < 1e-5 * max(1, test_loss), (again, test_loss)
    print(f"{'parametrizations' if new_api else 'weight_norm'}: test MSE {test_loss:.5f}")
    results.append(test_loss)
print(f"final_loss: {np.mean(results):.6f}")
