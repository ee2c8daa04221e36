"""varlens.nn: modules, layers, initialisers and losses (PyTorch's names and shapes).

One file per kind of layer, named as torch.nn.modules names them: linear, flatten, activation, dropout,
batchnorm, instancenorm, normalization (LayerNorm, RMSNorm, GroupNorm, LocalResponseNorm), sparse
(Embedding, EmbeddingBag), loss, adaptive, rnn, conv, pooling, padding, upsampling, pixelshuffle,
channelshuffle, fold, distance, attention, transformer; relative (Transformer-XL) and positional are
varlens's own.
"""
from varlens.nn.parameter import Parameter  # noqa: F401
from varlens.nn.module import Module  # noqa: F401
from varlens.nn import functional, init  # noqa: F401
from varlens.nn.container import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                                  Sequential)
from varlens.nn.linear import Bilinear, Identity, LazyLinear, Linear  # noqa: F401
from varlens.nn.flatten import Flatten, Unflatten  # noqa: F401
from varlens.nn.activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,  # noqa: F401
                                   LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, RReLU, ReLU, ReLU6, SELU,
                                   SiLU, Sigmoid, Softmax, Softmax2d, Softmin, Softplus, Softshrink,
                                   Softsign, Tanh, Tanhshrink, Threshold)
from varlens.nn.dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout)  # noqa: F401
from varlens.nn.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from varlens.nn.syncbatchnorm import SyncBatchNorm  # noqa: F401  (statistics reduced across ranks)
from varlens.nn.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from varlens.nn.normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401
from varlens.nn.sparse import Embedding, EmbeddingBag  # noqa: F401
from varlens.nn.loss import (BCELoss, BCEWithLogitsLoss, CTCLoss, CosineEmbeddingLoss, CrossEntropyLoss,  # noqa: F401
                             GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                             LinearCrossEntropyLoss, MSELoss, MarginRankingLoss, MultiLabelMarginLoss,
                             MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, NLLLoss2d, PoissonNLLLoss,
                             SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from varlens.nn.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from varlens.nn.rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from varlens.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from varlens.nn.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401
                                AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                                FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d, LPPool2d, LPPool3d,
                                MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from varlens.nn.padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,  # noqa: F401
                                ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                                ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                                ZeroPad3d)
from varlens.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from varlens.nn.pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from varlens.nn.channelshuffle import ChannelShuffle  # noqa: F401
from varlens.nn.fold import Fold, Unfold  # noqa: F401
from varlens.nn.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from varlens.nn import utils  # noqa: F401,E402
from varlens.nn import parallel  # noqa: F401,E402  (nn.parallel.DistributedDataParallel)
from varlens.nn.parallel import DataParallel  # noqa: F401,E402
from varlens.nn.attention import MultiheadAttention  # noqa: F401,E402
from varlens.nn.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401,E402
                                    TransformerEncoder, TransformerEncoderLayer)
from varlens.nn.relative import RelativeMultiheadAttention, TransformerXL, TransformerXLLayer  # noqa: F401,E402
from varlens.nn import modules  # noqa: F401,E402  (torch.nn.modules.loss._Loss ...: alias paths, varlens/nn/modules)
