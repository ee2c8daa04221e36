"""The official PyTorch fast-neural-style example (examples/fast_neural_style: transformer_net.py,
utils.gram_matrix, the training loop of neural_style.py) at 32x32 with small widths.  Exercises
ReflectionPad2d, InstanceNorm2d(affine=True), residual blocks, nearest-neighbour
F.interpolate upsampling, Gram matrices with bmm, a frozen feature network (requires_grad False)
standing in for VGG-16, and content + style MSE losses.  Offline smooth images replace COCO."""
import argparse
from collections import namedtuple

import numpy as np
import torch
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset

from _synthetic import images


class TransformerNet(torch.nn.Module):
    def __init__(self, w=8):
        super(TransformerNet, self).__init__()
        # Initial convolution layers
        self.conv1 = ConvLayer(3, w, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(w, affine=True)
        self.conv2 = ConvLayer(w, 2 * w, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(2 * w, affine=True)
        self.conv3 = ConvLayer(2 * w, 4 * w, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(4 * w, affine=True)
        # Residual layers
        self.res1 = ResidualBlock(4 * w)
        self.res2 = ResidualBlock(4 * w)
        # Upsampling Layers
        self.deconv1 = UpsampleConvLayer(4 * w, 2 * w, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(2 * w, affine=True)
        self.deconv2 = UpsampleConvLayer(2 * w, w, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(w, affine=True)
        self.deconv3 = ConvLayer(w, 3, kernel_size=9, stride=1)
        # Non-linearities
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res1(y)
        y = self.res2(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """ResidualBlock
    introduced in: https://arxiv.org/abs/1512.03385
    recommended architecture: http://torch.ch/blog/2016/02/04/resnets.html
    """

    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """UpsampleConvLayer
    Upsamples the input and then does a convolution. This method gives better results
    compared to ConvTranspose2d.
    ref: http://distill.pub/2016/deconv-checkerboard/
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = torch.nn.functional.interpolate(x_in, mode='nearest', scale_factor=self.upsample)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out


class Features(torch.nn.Module):
    """Stands in for the example's Vgg16 (torchvision weights are not available offline): a
    fixed, randomly initialised conv stack returning the same kind of named tuple of slices."""

    def __init__(self, requires_grad=False):
        super(Features, self).__init__()
        self.slice1 = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(inplace=True))
        self.slice2 = torch.nn.Sequential(torch.nn.MaxPool2d(kernel_size=2, stride=2),
                                          torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(inplace=True))
        # "pretrained" weights loaded from NumPy arrays, the same numbers on either framework
        # (the example loads torchvision's VGG-16 checkpoint)
        rng = np.random.default_rng(1234)
        state = {}
        for name, value in self.state_dict().items():
            fan_in = value[0].numel() if value.dim() > 1 else 1
            w = rng.standard_normal(tuple(value.shape)) * np.sqrt(2.0 / fan_in) if value.dim() > 1 else np.zeros(tuple(value.shape))
            state[name] = torch.from_numpy(w.astype('float32'))
        self.load_state_dict(state)
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        vgg_outputs = namedtuple("VggOutputs", ['relu1_2', 'relu2_2'])
        return vgg_outputs(h_relu1_2, h_relu2_2)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def train(args):
    device = torch.device("cpu")
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    data = torch.from_numpy(((images(96, size=args.image_size, seed=0) + 1) * 127.5).astype('float32'))
    train_loader = DataLoader(TensorDataset(data, torch.zeros(len(data))), batch_size=args.batch_size)

    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    vgg = Features(requires_grad=False).to(device)
    style = torch.from_numpy(((images(1, size=args.image_size, seed=5) + 1) * 127.5).astype('float32'))
    style = style.repeat(args.batch_size, 1, 1, 1).to(device)

    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for e in range(args.epochs):
        transformer.train()
        agg_content_loss = 0.
        agg_style_loss = 0.
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x)

            y = normalize_batch(y)
            x = normalize_batch(x)

            features_y = vgg(y)
            features_x = vgg(x)

            content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= args.style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % args.log_interval == 0:
                mesg = "Epoch {}:\t[{}/{}]\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(
                    e + 1, count, len(data),
                    agg_content_loss / (batch_id + 1),
                    agg_style_loss / (batch_id + 1),
                    (agg_content_loss + agg_style_loss) / (batch_id + 1)
                )
                print(mesg)
    return (agg_content_loss + agg_style_loss) / (batch_id + 1)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--image-size", type=int, default=32)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--content-weight", type=float, default=1.0)
parser.add_argument("--style-weight", type=float, default=1e3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--log-interval", type=int, default=6)
args = parser.parse_args()
loss = train(args)
print(f"final_loss: {loss:.6f}")
