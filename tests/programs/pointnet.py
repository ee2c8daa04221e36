"""PointNet classification (fxia22/pointnet.pytorch's model.py and train_classification.py) on
synthetic point clouds of five primitive shapes (sphere, cube surface, cylinder, cone, torus),
randomly rotated about the up axis and jittered.  Exercises Conv1d(k=1) point-wise MLPs, the
T-nets (STN3d / STNkd) with an identity added by torch.eye(...).flatten().view(1, k*k).repeat,
torch.bmm with transposes, torch.max over points (values/indices) with keepdim, the feature
transform regulariser ||I - A A^T||, BatchNorm1d on (B, C, N), transpose(2, 1), Dropout,
log_softmax + nll_loss, StepLR, and the pred.data.max(1)[1] accuracy idiom."""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from torch.autograd import Variable

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--nepoch', type=int, default=4)
parser.add_argument('--num_points', type=int, default=96)
parser.add_argument('--feature_transform', action='store_true', default=True)
opt = parser.parse_args()
torch.manual_seed(opt.seed)


def shape_points(kind, n, rng):
    u, v = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    if kind == 0:     # sphere
        th, ph = 2 * np.pi * u, np.arccos(2 * v - 1)
        p = np.stack([np.sin(ph) * np.cos(th), np.sin(ph) * np.sin(th), np.cos(ph)], 1)
    elif kind == 1:   # cube surface
        p = rng.uniform(-1, 1, (n, 3))
        ax = rng.integers(0, 3, n)
        p[np.arange(n), ax] = np.sign(rng.uniform(-1, 1, n))
        p *= 0.8
    elif kind == 2:   # cylinder
        th = 2 * np.pi * u
        p = np.stack([np.cos(th) * 0.6, np.sin(th) * 0.6, 2 * v - 1], 1)
    elif kind == 3:   # cone
        th, h = 2 * np.pi * u, v
        p = np.stack([(1 - h) * np.cos(th), (1 - h) * np.sin(th), 2 * h - 1], 1)
    else:             # torus
        th, ph = 2 * np.pi * u, 2 * np.pi * v
        p = np.stack([(0.7 + 0.3 * np.cos(ph)) * np.cos(th), (0.7 + 0.3 * np.cos(ph)) * np.sin(th),
                      0.3 * np.sin(ph)], 1)
    return p


class ShapeDataset(torch.utils.data.Dataset):
    def __init__(self, n, npoints, seed, data_augmentation=True):
        self.rng = np.random.default_rng(seed)
        self.npoints = npoints
        self.labels = self.rng.integers(0, 5, n)
        self.clouds = [shape_points(k, npoints, self.rng) * self.rng.uniform(0.7, 1.2) for k in self.labels]
        self.data_augmentation = data_augmentation

    def __getitem__(self, index):
        point_set = self.clouds[index].copy()
        point_set = point_set - np.expand_dims(np.mean(point_set, axis=0), 0)  # center
        dist = np.max(np.sqrt(np.sum(point_set ** 2, axis=1)), 0)
        point_set = point_set / dist  # scale
        if self.data_augmentation:
            theta = self.rng.uniform(0, np.pi * 2)
            rotation_matrix = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
            point_set[:, [0, 2]] = point_set[:, [0, 2]].dot(rotation_matrix)  # random rotation
            point_set += self.rng.normal(0, 0.02, size=point_set.shape)  # random jitter
        point_set = torch.from_numpy(point_set.astype(np.float32))
        cls = torch.from_numpy(np.array([self.labels[index]]).astype(np.int64))
        return point_set, cls

    def __len__(self):
        return len(self.labels)


class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = torch.nn.Conv1d(3, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 9)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn4 = nn.BatchNorm1d(32)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 64)
        x = F.relu(self.bn4(self.fc1(x)))
        x = self.fc2(x)
        iden = Variable(torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))).view(1, 9).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, 3, 3)
        return x


class STNkd(nn.Module):
    def __init__(self, k=32):
        super(STNkd, self).__init__()
        self.conv1 = torch.nn.Conv1d(k, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, k * k)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn4 = nn.BatchNorm1d(32)
        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 64)
        x = F.relu(self.bn4(self.fc1(x)))
        x = self.fc2(x)
        iden = torch.eye(self.k).flatten().view(1, self.k * self.k).repeat(batchsize, 1)
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetfeat(nn.Module):
    def __init__(self, global_feat=True, feature_transform=False):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = torch.nn.Conv1d(3, 32, 1)
        self.conv2 = torch.nn.Conv1d(32, 64, 1)
        self.conv3 = torch.nn.Conv1d(64, 128, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(128)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=32)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2, 1)
        else:
            trans_feat = None
        pointfeat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 128)
        if self.global_feat:
            return x, trans, trans_feat
        x = x.view(-1, 128, 1).repeat(1, 1, n_pts)
        return torch.cat([x, pointfeat], 1), trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k=2, feature_transform=False):
        super(PointNetCls, self).__init__()
        self.feature_transform = feature_transform
        self.feat = PointNetfeat(global_feat=True, feature_transform=feature_transform)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(32)
        self.relu = nn.ReLU()

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    batchsize = trans.size()[0]
    I = torch.eye(d)[None, :, :]
    if trans.is_cuda:
        I = I.cuda()
    loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))
    return loss


dataset = ShapeDataset(480, opt.num_points, seed=0)
test_dataset = ShapeDataset(200, opt.num_points, seed=1, data_augmentation=False)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=0)
testdataloader = torch.utils.data.DataLoader(test_dataset, batch_size=50, shuffle=False, num_workers=0)

classifier = PointNetCls(k=5, feature_transform=opt.feature_transform)
optimizer = optim.Adam(classifier.parameters(), lr=0.003, betas=(0.9, 0.999))
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
num_batch = len(dataset) / 32

for epoch in range(opt.nepoch):
    for i, data in enumerate(dataloader, 0):
        points, target = data
        target = target[:, 0]
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        if opt.feature_transform:
            loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()
    scheduler.step()
    print('[%d] train loss: %f accuracy: %f' % (epoch, loss.item(), correct.item() / float(32)))

total_correct, total_testset, total_loss = 0, 0, 0.0
classifier = classifier.eval()
with torch.no_grad():
    for i, data in enumerate(testdataloader, 0):
        points, target = data
        target = target[:, 0]
        points = points.transpose(2, 1)
        pred, _, _ = classifier(points)
        total_loss += F.nll_loss(pred, target, reduction='sum').item()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()
        total_correct += correct.item()
        total_testset += points.size()[0]
print("final accuracy {}".format(total_correct / float(total_testset)))
print(f"final_loss: {total_loss / total_testset:.6f}")
