"""A U-Net for binary segmentation in the style of milesial/Pytorch-UNet (unet_parts.py,
train.py, dice_score.py) on synthetic images of discs and squares with their masks.
Exercises ConvTranspose2d and bilinear nn.Upsample(align_corners=True) up-paths, torch.cat skip
connections with F.pad to match odd sizes, BatchNorm2d, MaxPool2d, BCEWithLogitsLoss plus a soft
Dice loss (F.sigmoid, sum over dims, epsilon), F.interpolate, RMSprop with momentum and
foreach, ReduceLROnPlateau, torch.save / torch.load of a checkpoint dict with the optimizer
state, and torch.inference_mode evaluation."""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, Dataset, random_split

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--bilinear', action='store_true')
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True)
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # input is CHW
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2,
                        diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False, base=8):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4 // factor)
        self.up1 = Up(base * 4, base * 2 // factor, bilinear)
        self.up2 = Up(base * 2, base, bilinear)
        self.outc = OutConv(base, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        logits = self.outc(x)
        return logits


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    # Average of Dice coefficient for all batches, or for a single mask
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def dice_loss(input, target):
    return 1 - dice_coeff(input, target, reduce_batch_first=True)


class Shapes(Dataset):
    """Noisy grey images (1, 20, 20) with one or two bright discs / squares; the mask marks them.
    Odd size 20 -> 10 -> 5 exercises the F.pad in Up."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:20, 0:20]
        self.x = np.zeros((n, 1, 20, 20), np.float32)
        self.m = np.zeros((n, 20, 20), np.float32)
        for i in range(n):
            for _ in range(rng.integers(1, 3)):
                cy, cx, r = rng.integers(4, 16), rng.integers(4, 16), rng.integers(2, 5)
                if rng.random() < 0.5:
                    shape = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
                else:
                    shape = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
                self.m[i][shape] = 1.0
            self.x[i, 0] = self.m[i] * 0.6 + rng.normal(0, 0.35, (20, 20))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return {'image': torch.as_tensor(self.x[idx]).float().contiguous(),
                'mask': torch.as_tensor(self.m[idx]).long().contiguous()}


dataset = Shapes(240, seed=0)
n_val = 40
train_set, val_set = random_split(dataset, [len(dataset) - n_val, n_val], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, shuffle=True, batch_size=16)
val_loader = DataLoader(val_set, shuffle=False, batch_size=20, drop_last=False)
# the reported score is on a separately generated test set: random_split's permutation comes from the
# framework's generator, so its val set differs between PyTorch and varlens whatever the seed
test_loader = DataLoader(Shapes(60, seed=1), shuffle=False, batch_size=20)

model = UNet(n_channels=1, n_classes=1, bilinear=args.bilinear).to(device=device, memory_format=torch.channels_last)
optimizer = optim.RMSprop(model.parameters(), lr=3e-3, weight_decay=1e-8, momentum=0.9, foreach=True)
scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=5)
criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()


@torch.inference_mode()
def evaluate(net, dataloader):
    net.eval()
    dice_score, bce = 0, 0
    for batch in dataloader:
        image, mask_true = batch['image'], batch['mask']
        image = image.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
        mask_true = mask_true.to(device=device, dtype=torch.long)
        mask_pred = net(image)
        bce += F.binary_cross_entropy_with_logits(mask_pred.squeeze(1), mask_true.float()).item()
        mask_pred = (F.sigmoid(mask_pred) > 0.5).float()
        dice_score += dice_coeff(mask_pred.squeeze(1), mask_true.float(), reduce_batch_first=False)
    net.train()
    return dice_score / max(len(dataloader), 1), bce / len(dataloader)


global_step = 0
for epoch in range(1, args.epochs + 1):
    model.train()
    epoch_loss = 0
    for batch in train_loader:
        images, true_masks = batch['image'], batch['mask']
        assert images.shape[1] == model.n_channels
        images = images.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
        true_masks = true_masks.to(device=device, dtype=torch.long)
        masks_pred = model(images)
        loss = criterion(masks_pred.squeeze(1), true_masks.float())
        loss += dice_loss(F.sigmoid(masks_pred.squeeze(1)), true_masks.float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        global_step += 1
        epoch_loss += loss.item()
    val_score, val_bce = evaluate(model, val_loader)
    scheduler.step(val_score)
    print(f"epoch {epoch}: train loss {epoch_loss / len(train_loader):.4f}  val dice {float(val_score):.4f}  val bce {val_bce:.4f}")

# checkpoint round trip, as train.py's save_checkpoint
path = os.path.join(tempfile.mkdtemp(), 'checkpoint_epoch.pth')
state_dict = model.state_dict()
state_dict['mask_values'] = [0, 1]
torch.save({'model': state_dict, 'optimizer': optimizer.state_dict()}, path)
ckpt = torch.load(path, map_location=device)
mask_values = ckpt['model'].pop('mask_values', [0, 1])
net2 = UNet(n_channels=1, n_classes=1, bilinear=args.bilinear)
net2.load_state_dict(ckpt['model'])
opt2 = optim.RMSprop(net2.parameters(), lr=3e-3, momentum=0.9)
opt2.load_state_dict(ckpt['optimizer'])
test_score, test_bce = evaluate(model, test_loader)
d2, b2 = evaluate(net2, test_loader)
assert abs(float(d2) - float(test_score)) < 1e-5 and abs(b2 - test_bce) < 1e-5, (d2, test_score, b2, test_bce)

# predict at a different resolution through F.interpolate, as predict.py does
with torch.no_grad():
    img = F.interpolate(dataset[0]['image'].unsqueeze(0), size=(40, 40), mode='bilinear', align_corners=False)
    out = model(img)
    out = F.interpolate(out, (20, 20), mode='bilinear')
    print('predicted foreground fraction', (out > 0).float().mean().item())
print(f"test dice {float(test_score):.4f}  test bce {test_bce:.4f}")
print(f"final_loss: {test_bce + 1 - float(test_score):.6f}")
