"""A CIFAR-10 ResNet training script in the style of kuangliu/pytorch-cifar (models/resnet.py,
main.py) at small widths: BasicBlock with BatchNorm2d and a 1x1 shortcut, AdaptiveAvgPool2d,
SGD with nesterov momentum and weight decay, OneCycleLR (or CosineAnnealingLR) stepped per batch,
random-crop / flip augmentation written with torch ops, model.eval() + torch.no_grad()
evaluation, and a state_dict save / load round trip (the reloaded model must score the same).
Offline synthetic 3-channel images replace CIFAR-10."""
import argparse
import io
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from _synthetic import digits


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        out = F.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=8):
        super(ResNet, self).__init__()
        self.in_planes = width

        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.linear = nn.Linear(4 * width * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.avgpool(out)
        out = out.view(out.size(0), -1)
        out = self.linear(out)
        return out


def ResNetTiny():
    return ResNet(BasicBlock, [1, 1, 1])


def augment(x):
    """transforms.RandomCrop(16, padding=1) + RandomHorizontalFlip, batched with torch ops."""
    n, _, h, w = x.shape
    padded = F.pad(x, (1, 1, 1, 1))
    i, j = torch.randint(0, 3, (2,)).tolist()
    x = padded[:, :, i:i + h, j:j + w]
    flip = torch.rand(n) < 0.5
    return torch.where(flip.view(-1, 1, 1, 1), torch.flip(x, dims=[3]), x)


def main():
    parser = argparse.ArgumentParser(description='PyTorch CIFAR10 Training')
    parser.add_argument('--lr', default=0.1, type=float, help='learning rate')
    parser.add_argument('--epochs', default=5, type=int)
    parser.add_argument('--seed', default=0, type=int)
    parser.add_argument('--sched', default='onecycle', choices=['onecycle', 'cosine'])
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'

    x, y = digits(512, seed=0, size=16)
    xt, yt = digits(256, seed=1, size=16)
    # three colour channels; transforms.Normalize with per-channel statistics
    x, xt = np.repeat(x, 3, axis=1) * np.float32([[[[1.0]], [[0.8]], [[0.6]]]]), np.repeat(xt, 3, axis=1) * np.float32([[[[1.0]], [[0.8]], [[0.6]]]])
    mean = torch.tensor(x.mean(axis=(0, 2, 3))).view(1, 3, 1, 1)
    std = torch.tensor(x.std(axis=(0, 2, 3))).view(1, 3, 1, 1)
    trainset = torch.utils.data.TensorDataset((torch.from_numpy(x) - mean) / std, torch.from_numpy(y))
    testset = torch.utils.data.TensorDataset((torch.from_numpy(xt) - mean) / std, torch.from_numpy(yt))
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=64, shuffle=True, num_workers=0)
    testloader = torch.utils.data.DataLoader(testset, batch_size=100, shuffle=False, num_workers=0)

    net = ResNetTiny().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    if args.sched == 'onecycle':
        scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, epochs=args.epochs,
                                                  steps_per_epoch=len(trainloader))
    else:
        scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(trainloader))

    def train(epoch):
        print('\nEpoch: %d' % epoch)
        net.train()
        train_loss = 0
        correct = 0
        total = 0
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = augment(inputs.to(device)), targets.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            scheduler.step()

            train_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
        print('train Loss: %.3f | Acc: %.3f%% (%d/%d) | lr %.4f'
              % (train_loss / (batch_idx + 1), 100. * correct / total, correct, total,
                 scheduler.get_last_lr()[0]))
        return train_loss / (batch_idx + 1)

    def test(model):
        model.eval()
        test_loss = 0
        correct = 0
        total = 0
        with torch.no_grad():
            for batch_idx, (inputs, targets) in enumerate(testloader):
                inputs, targets = inputs.to(device), targets.to(device)
                outputs = model(inputs)
                loss = criterion(outputs, targets)

                test_loss += loss.item()
                _, predicted = outputs.max(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
        print('test Loss: %.3f | Acc: %.3f%% (%d/%d)'
              % (test_loss / (batch_idx + 1), 100. * correct / total, correct, total))
        return test_loss / (batch_idx + 1), correct

    for epoch in range(args.epochs):
        train_loss = train(epoch)
        loss, acc = test(net)

    # Save checkpoint, then load it into a fresh model: it must give the same test result.
    print('Saving..')
    state = {'net': net.state_dict(), 'acc': acc, 'epoch': epoch, 'optimizer': optimizer.state_dict()}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'ckpt.pth')
        torch.save(state, path)
        checkpoint = torch.load(path)
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    buffer.seek(0)
    assert sorted(torch.load(buffer).keys()) == sorted(net.state_dict().keys())
    net2 = ResNetTiny().to(device)
    net2.load_state_dict(checkpoint['net'])
    optimizer2 = optim.SGD(net2.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    optimizer2.load_state_dict(checkpoint['optimizer'])
    loss2, acc2 = test(net2)
    assert acc2 == checkpoint['acc'] and abs(loss2 - loss) < 1e-5, (loss, loss2, acc, acc2)
    # the reported loss: the last epoch's mean training loss (the test loss of a BatchNorm net
    # after 40 steps swings with the running statistics)
    print(f"final_loss: {train_loss:.6f}")


if __name__ == '__main__':
    main()
