"""varlens.nn.functional: the stateless forms of every layer and loss (PyTorch's names, argument
names and defaults), so ``import varlens.nn.functional as F`` reads as in PyTorch.

One file per family, each name defined once: linear_maps, activation, dropout_masks, normalization,
distance, sparse (embedding), vision (pad, interpolate, grid_sample, fold/unfold, pixel_shuffle), conv,
pooling, attention, loss; shared argument checks in _common.  The fused ops with closed-form backwards live in varlens.ops;
what is composed here from differentiable ops gets its gradient by the chain rule through those ops
(seed 001 §2), and where PyTorch departs from the plain chain rule (the no_grad clamp in
cosine_similarity, max pooling's routing to one index) the same exception is built in and commented.
See docs/conventions.md, "nn layers, init, losses", for where varlens and the notes differ.
"""
from varlens.nn.functional.linear_maps import bilinear, linear  # noqa: F401
from varlens.nn.functional.activation import (celu, celu_, elu, elu_, gelu, glu, gumbel_softmax, hardshrink,
                                              hardsigmoid, hardsigmoid_, hardswish, hardswish_, hardtanh,
                                              hardtanh_, leaky_relu, leaky_relu_, log_softmax, logsigmoid,
                                              mish, mish_, prelu, relu, relu6, relu6_, relu_, rrelu, rrelu_,
                                              selu, selu_, sigmoid, silu, silu_, softmax, softmax2d, softmin,
                                              softplus, softshrink, softsign, tanh, tanhshrink, threshold,
                                              threshold_)  # noqa: F401
from varlens.nn.functional.dropout_masks import (alpha_dropout, dropout, dropout1d, dropout2d, dropout3d,
                                           feature_alpha_dropout)  # noqa: F401
from varlens.nn.functional.normalization import (batch_norm, group_norm, instance_norm, layer_norm,
                                                 local_response_norm, normalize, rms_norm)  # noqa: F401
from varlens.nn.functional.distance import cosine_similarity, pairwise_distance, pdist  # noqa: F401
from varlens.nn.functional.sparse import embedding, embedding_bag, one_hot  # noqa: F401
from varlens.nn.functional.vision import (affine_grid, channel_shuffle, fold, grid_sample, interpolate,
                                          native_channel_shuffle, pad, pixel_shuffle, pixel_unshuffle,
                                          unfold, upsample, upsample_bilinear, upsample_nearest)  # noqa: F401
from varlens.nn.functional.conv import (conv1d, conv2d, conv3d, conv_tbc, conv_transpose1d, conv_transpose2d,
                                        conv_transpose3d)  # noqa: F401
from varlens.nn.functional.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,
                                           adaptive_max_pool1d, adaptive_max_pool1d_with_indices,
                                           adaptive_max_pool2d, adaptive_max_pool2d_with_indices,
                                           adaptive_max_pool3d, adaptive_max_pool3d_with_indices, avg_pool1d,
                                           avg_pool2d, avg_pool3d, fractional_max_pool2d,
                                           fractional_max_pool2d_with_indices, fractional_max_pool3d,
                                           fractional_max_pool3d_with_indices, lp_pool1d, lp_pool2d,
                                           lp_pool3d, max_pool1d, max_pool1d_with_indices, max_pool2d,
                                           max_pool2d_with_indices, max_pool3d, max_pool3d_with_indices,
                                           max_unpool1d, max_unpool2d, max_unpool3d)  # noqa: F401
from varlens.nn.functional.attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: F401
from varlens.nn.functional.loss import (binary_cross_entropy, binary_cross_entropy_with_logits,
                                        cosine_embedding_loss, cross_entropy, ctc_loss, gaussian_nll_loss,
                                        hinge_embedding_loss, huber_loss, kl_div, l1_loss, l1_penalty,
                                        l2_penalty, linear_cross_entropy, margin_ranking_loss, mse_loss,
                                        multi_margin_loss, multilabel_margin_loss,
                                        multilabel_soft_margin_loss, nll_loss, poisson_nll_loss,
                                        smooth_l1_loss, soft_margin_loss, triplet_margin_loss,
                                        triplet_margin_with_distance_loss)  # noqa: F401
from varlens.nn.functional._common import IndexTypeError, NotATensorError  # noqa: F401
