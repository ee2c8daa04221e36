"""varlens.models: ready-made networks built from varlens.nn."""
from varlens.models.mlp import MLP, init_linear_  # noqa: F401
from varlens.models.lenet import LeNet5  # noqa: F401,E402
from varlens.models.vgg import VGG  # noqa: F401,E402
from varlens.models.resnet import BasicBlock, ResNet, resnet_cifar  # noqa: F401,E402
from varlens.models.vit import ViT  # noqa: F401,E402
from varlens.models.bert import BERT  # noqa: F401,E402
from varlens.models.transformer_seq2seq import TransformerSeq2Seq  # noqa: F401,E402
