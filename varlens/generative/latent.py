"""Latent diffusion (seed 003 §11.5): run the diffusion of §11 in the latent space of an
autoencoder instead of pixel space.

``LatentDiffusion(vae, denoiser, diffusion)``: the (trained, frozen) VAE's encoder mean maps an
image x to z = mu(x); latents are divided by their standard deviation on the training set
(``fit_scale``) so that the data the diffusion sees has unit variance, as the forward process
assumes (eq. 11.1.3 keeps unit variance). Training: L_simple on the scaled latents. Sampling:
draw latents with DDPM or DDIM, undo the scaling, decode with the VAE's decoder.
"""
from __future__ import annotations


from varlens.autograd import no_grad
from varlens.core.tensor import Tensor


class LatentDiffusion:
    def __init__(self, vae, denoiser, diffusion):
        self.vae, self.denoiser, self.diffusion = vae, denoiser, diffusion
        self.scale = 1.0
        self.shift = 0.0

    def encode(self, x, y=None):
        """Scaled latents of images x (no gradient flows into the VAE)."""
        with no_grad():
            mu, _ = self.vae.encode(x.reshape(x.shape[0], -1), y if self.vae.num_classes else None)
        return (mu - self.shift) * (1.0 / self.scale)

    def fit_scale(self, x):
        """Set shift and scale from a batch of training images: z' = (mu(x) - mean) / std."""
        with no_grad():
            mu, _ = self.vae.encode(x.reshape(x.shape[0], -1))
        a = mu._data
        self.shift = Tensor._make(a.mean(0).astype(a.dtype))
        self.scale = float((a - a.mean(0)).std())
        return self

    def decode(self, z, y=None):
        with no_grad():
            return self.vae.mean_image(self.vae.decode(z * self.scale + self.shift,
                                                       y if self.vae.num_classes else None))

    def loss(self, x, y=None, **kw):
        """L_simple on the latents of x; ``y`` goes to a label-conditioned denoiser."""
        z = self.encode(x)
        mk = {} if y is None else dict(y=y)
        return self.diffusion.training_losses(self.denoiser, z, model_kwargs=mk, **kw)

    def sample(self, n, model=None, ddim_steps=None, generator=None, y=None):
        """n decoded samples. ``model`` overrides the denoiser (e.g. a ClassifierFreeGuidance)."""
        m = model or self.denoiser
        shape = (int(n), self.vae.latent_dim)
        if ddim_steps:
            z = self.diffusion.ddim_sample(m, shape, ddim_steps, generator=generator)
        else:
            z = self.diffusion.sample(m, shape, generator=generator)
        return self.decode(z, y)
