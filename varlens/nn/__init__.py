"""varlens.nn: modules, layers, initialisers and losses (PyTorch's names and shapes)."""
from varlens.nn.parameter import Parameter  # noqa: F401
from varlens.nn.module import Module  # noqa: F401
from varlens.nn import functional, init  # noqa: F401
from varlens.nn.container import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                                  Sequential)
from varlens.nn.linear import Bilinear, Flatten, Identity, LazyLinear, Linear, Unflatten  # noqa: F401
from varlens.nn.activation import (CELU, ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax,  # noqa: F401
                                   Mish, PReLU, ReLU, ReLU6, SELU, Sigmoid, SiLU, Softmax, Softmin,
                                   Softplus, Softsign, Tanh, Threshold)
from varlens.nn.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from varlens.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm  # noqa: F401
from varlens.nn.embedding import Embedding  # noqa: F401
from varlens.nn.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, GaussianNLLLoss,  # noqa: F401
                             HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, PoissonNLLLoss,
                             SmoothL1Loss)
from varlens.nn import utils  # noqa: F401,E402
from varlens.nn.recurrent import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401,E402
from varlens.nn.attention import MultiheadAttention  # noqa: F401,E402
from varlens.nn.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401,E402
                                    TransformerEncoder, TransformerEncoderLayer)
from varlens.nn.relative import RelativeMultiheadAttention, TransformerXL, TransformerXLLayer  # noqa: F401,E402
from varlens.nn.conv import Conv1d, Conv2d, ConvTranspose2d  # noqa: F401,E402
from varlens.nn.pooling import (AdaptiveAvgPool2d, AvgPool2d, MaxPool2d, Upsample,  # noqa: F401,E402
                                UpsamplingNearest2d)
# more torch.nn layers and losses (Upsample/UpsamplingNearest2d here take every interpolate mode)
from varlens.nn.extra_layers import *  # noqa: F401,F403,E402
from varlens.nn.extra_losses import *  # noqa: F401,F403,E402
