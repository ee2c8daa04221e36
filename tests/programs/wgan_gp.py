"""WGAN-GP on the 8-Gaussians toy data, in the style of the widely used PyTorch port of
"Improved Training of Wasserstein GANs" (gan_toy.py): the gradient penalty takes
torch.autograd.grad(outputs, inputs, grad_outputs=ones, create_graph=True, retain_graph=True,
only_inputs=True), so the critic's update differentiates through a gradient (double backward).
Also exercises requires_grad toggling on the critic, Adam with betas (0.5, 0.9), and
backward(mone) with a tensor gradient."""
import argparse
import random

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--iters', type=int, default=120)
args = parser.parse_args()
torch.manual_seed(args.seed)
random.seed(args.seed)

DIM = 64  # Model dimensionality
LAMBDA = .1  # Smaller lambda seems to help for toy tasks specifically
CRITIC_ITERS = 5  # How many critic iterations per generator iteration
BATCH_SIZE = 64  # Batch size
use_cuda = False


class Generator(nn.Module):

    def __init__(self):
        super(Generator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 2),
        )
        self.main = main

    def forward(self, noise, real_data):
        output = self.main(noise)
        return output


class Discriminator(nn.Module):

    def __init__(self):
        super(Discriminator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 1),
        )
        self.main = main

    def forward(self, inputs):
        output = self.main(inputs)
        return output.view(-1)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        m.weight.data.normal_(0.0, 0.02)
        m.bias.data.fill_(0)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def inf_train_gen(rng):
    scale = 2.
    centers = [(1, 0), (-1, 0), (0, 1), (0, -1),
               (1. / np.sqrt(2), 1. / np.sqrt(2)), (1. / np.sqrt(2), -1. / np.sqrt(2)),
               (-1. / np.sqrt(2), 1. / np.sqrt(2)), (-1. / np.sqrt(2), -1. / np.sqrt(2))]
    centers = [(scale * x, scale * y) for x, y in centers]
    while True:
        dataset = []
        for i in range(BATCH_SIZE):
            point = rng.standard_normal(2) * .02
            center = centers[rng.integers(len(centers))]
            point[0] += center[0]
            point[1] += center[1]
            dataset.append(point)
        dataset = np.array(dataset, dtype='float32')
        dataset /= 1.414  # stdev
        yield dataset


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.rand(BATCH_SIZE, 1)
    alpha = alpha.expand(real_data.size())

    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates = interpolates.clone().detach().requires_grad_(True)

    disc_interpolates = netD(interpolates)

    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]

    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    return gradient_penalty


netG = Generator()
netD = Discriminator()
netD.apply(weights_init)
netG.apply(weights_init)

optimizerD = optim.Adam(netD.parameters(), lr=1e-4 * 5, betas=(0.5, 0.9))
optimizerG = optim.Adam(netG.parameters(), lr=1e-4 * 5, betas=(0.5, 0.9))

one = torch.tensor(1, dtype=torch.float)
mone = one * -1

data = inf_train_gen(np.random.default_rng(0))
history = []
for iteration in range(args.iters):
    ############################
    # (1) Update D network
    ###########################
    for p in netD.parameters():  # reset requires_grad
        p.requires_grad = True  # they are set to False below in netG update

    for iter_d in range(CRITIC_ITERS):
        _data = next(data)
        real_data = torch.Tensor(_data)

        netD.zero_grad()

        # train with real
        D_real = netD(real_data)
        D_real = D_real.mean()
        D_real.backward(mone)

        # train with fake
        noise = torch.randn(BATCH_SIZE, 2)
        with torch.no_grad():
            fake = netG(noise, real_data)
        inputv = fake
        D_fake = netD(inputv)
        D_fake = D_fake.mean()
        D_fake.backward(one)

        # train with gradient penalty
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        gradient_penalty.backward()

        D_cost = D_fake - D_real + gradient_penalty
        Wasserstein_D = D_real - D_fake
        optimizerD.step()

    ############################
    # (2) Update G network
    ###########################
    for p in netD.parameters():
        p.requires_grad = False  # to avoid computation
    netG.zero_grad()

    _data = next(data)
    real_data = torch.Tensor(_data)

    noise = torch.randn(BATCH_SIZE, 2)
    fake = netG(noise, real_data)
    G = netD(fake)
    G = G.mean()
    G.backward(mone)
    G_cost = -G
    optimizerG.step()

    history.append(Wasserstein_D.item())
    if iteration % 20 == 19:
        print('iter %d  D_cost %.4f  G_cost %.4f  Wasserstein_D %.4f  gp %.4f' % (
            iteration + 1, D_cost.item(), G_cost.item(), Wasserstein_D.item(), gradient_penalty.item()))

# the sample quality: mean distance of generated points to the nearest of the eight centres
with torch.no_grad():
    samples = netG(torch.randn(512, 2), None)
    centers = torch.tensor([[np.cos(a), np.sin(a)] for a in np.arange(8) * np.pi / 4],
                           dtype=torch.float) * 2 / 1.414
    dist = torch.cdist(samples, centers).min(dim=1).values.mean().item()
print('mean distance to nearest centre %.4f' % dist)
# the reported "loss": the critic's Wasserstein estimate averaged over the last 30 iterations
# (it depends on the gradient penalty's double backward through the critic)
print(f"final_loss: {np.mean(history[-30:]):.6f}")
