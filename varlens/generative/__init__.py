"""varlens.generative: GANs, VAEs and diffusion models (seed 003 §9-§11).

- ``diffusion``: schedules, forward process, corrected posterior, L_simple, DDPM/DDIM sampling,
  and an MLP denoiser for flat data.
- ``vae``: Gaussian KLs, reparametrisation, ELBO, importance-sampled log p(x), (conditional) VAE.
- ``gan``: GAN losses, MLP and DCGAN-style generator/discriminator, alternating training.
- ``unet``: a small U-Net with time embedding, residual blocks and attention at low resolution.
- ``guidance``: classifier-free guidance and cross-attention conditioning.
- ``latent``: diffusion in a VAE's latent space.
- ``metrics``: MMD, energy distance, Frechet distance, mode coverage.
"""
from varlens.generative.diffusion import (DenoiserMLP, GaussianDiffusion, SinusoidalTimeEmbedding,  # noqa: F401
                                          cosine_beta_schedule, linear_beta_schedule)
from varlens.generative.metrics import (energy_distance, feature_frechet_distance,  # noqa: F401
                                        frechet_distance, mmd_rbf, mode_coverage, ring_centers)
from varlens.generative.vae import (VAE, bernoulli_nll, elbo, gaussian_kl, importance_log_px,  # noqa: F401
                                    kl_standard_normal, log_likelihood, reparameterize)
from varlens.generative.gan import (DCGANDiscriminator, DCGANGenerator, MLPDiscriminator, MLPGenerator,  # noqa: F401
                                    dcgan_init_, discriminator_loss, generator_loss, train_gan)
from varlens.generative.unet import CrossAttention2d, SelfAttention2d, UNet  # noqa: F401
from varlens.generative.guidance import ClassifierFreeGuidance, LabelContext, drop_labels, guided_eps  # noqa: F401
from varlens.generative.latent import LatentDiffusion  # noqa: F401
