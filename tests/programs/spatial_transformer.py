"""The PyTorch spatial transformer networks tutorial (intermediate/spatial_transformer_tutorial):
a localisation net regresses a 2x3 affine matrix (its last layer initialised to the identity
transform with weight.data.zero_() and bias.data.copy_()), F.affine_grid + F.grid_sample warp
the input, then a small classifier.  Offline synthetic digits (coarse 4x4-pixel blob patterns,
randomly shifted by up to 3 pixels) stand in for MNIST, and Adam at 2e-3 for the tutorial's
SGD(lr=0.01): in 40 steps that SGD stays at chance, where the identity-initialised transformer's
gradient (taken at exact pixel centres, a kink of bilinear sampling whose side depends on float
rounding, in PyTorch as in varlens) can drive theta away on either framework."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from _synthetic import digits

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--epochs', type=int, default=5)
args = parser.parse_args()
torch.manual_seed(args.seed)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def shifted_digits(n, seed):
    x, y = digits(n, seed=seed, block=4)
    rng = np.random.default_rng(seed + 100)
    for i in range(n):       # random translations of up to 3 pixels, like the tutorial's distortions
        x[i, 0] = np.roll(x[i, 0], tuple(rng.integers(-3, 4, 2)), axis=(0, 1))
    return torch.from_numpy((x - 0.1307) / 0.3081), torch.from_numpy(y)   # transforms.Normalize((0.1307,), (0.3081,))


train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(*shifted_digits(512, 0)), batch_size=64, shuffle=True, num_workers=0)
test_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(*shifted_digits(256, 1)), batch_size=64, shuffle=True, num_workers=0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


model = Net().to(device)
optimizer = optim.Adam(model.parameters(), lr=2e-3)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 4 == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test():
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)

            # sum up batch loss
            test_loss += F.nll_loss(output, target, size_average=False).item()
            # get the index of the max log-probability
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)
        print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'
              .format(test_loss, correct, len(test_loader.dataset),
                      100. * correct / len(test_loader.dataset)))
        return test_loss


for epoch in range(1, args.epochs + 1):
    train(epoch)
    loss = test()

# the tutorial's visualisation step: warp a batch with the learned transformer
with torch.no_grad():
    data = next(iter(test_loader))[0].to(device)
    transformed = model.stn(data).cpu()
    print('transformed batch', tuple(transformed.shape), 'mean %.4f' % transformed.mean().item())
print(f"final_loss: {loss:.6f}")
