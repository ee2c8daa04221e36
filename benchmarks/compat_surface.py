"""How much of PyTorch's public namespace varlens provides: imports each module path that public
PyTorch programs use and reads each name of it, with ``import torch`` meaning varlens.

    .venv/bin/python benchmarks/compat_surface.py            # the summary and per-module table
    .venv/bin/python benchmarks/compat_surface.py --missing  # also list every missing name

Two lists are checked:
1. COMMON: module paths and attributes that ordinary public programs touch (the official
   examples, tutorials, nanoGPT/minGPT/makemore-style code, Lightning-free training scripts),
   written down by hand below.  This is the figure the README states.
2. FULL: for each module path of COMMON, every public name of PyTorch 2.13's own module (its
   ``__all__``, or its ``dir()`` without underscores when it has none), read from the installed
   torch.  This is the wider, harder figure.

A name counts as provided when ``getattr`` succeeds.  A name that varlens deliberately refuses
(``torch.onnx.export`` raises NotImplementedError saying why) counts as provided: the program
gets a clear message, which is the requirement.  Missing means AttributeError/ImportError.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys

COMMON = {
    "torch": """Tensor tensor as_tensor from_numpy zeros ones empty full arange linspace logspace eye rand randn
        randint randperm rand_like randn_like zeros_like ones_like full_like empty_like manual_seed seed
        initial_seed get_rng_state set_rng_state Generator no_grad enable_grad set_grad_enabled inference_mode
        is_grad_enabled is_tensor is_floating_point numel cat concat stack hstack vstack split chunk squeeze unsqueeze
        reshape flatten transpose permute t matmul mm bmm einsum tril triu where clamp clip abs exp log sqrt
        sin cos tanh sigmoid relu softmax log_softmax sum mean std var max min amax amin argmax argmin topk sort
        argsort cumsum cumprod prod norm dist allclose isclose equal eq ne gt lt ge le logical_and logical_or
        logical_not isnan isinf isfinite nan_to_num multinomial bernoulli normal gather scatter index_select
        masked_select masked_fill take roll flip repeat_interleave tile broadcast_to meshgrid outer cdist diag
        diagonal trace det inverse pinverse svd lerp round floor ceil sign pow float32 float64 float16 bfloat16
        int64 int32 int8 uint8 bool long float double half int cfloat complex64 dtype device Size finfo iinfo
        get_default_dtype set_default_dtype set_printoptions save load device autocast cuda backends utils
        nn optim autograd distributions linalg fft special testing hub jit onnx random amp accelerator
        compile set_float32_matmul_precision get_float32_matmul_precision use_deterministic_algorithms
        are_deterministic_algorithms_enabled set_num_threads get_num_threads manual_seed __version__ version
        count_nonzero unique bincount histc searchsorted bucketize kron cross cumsum logsumexp erf lgamma
        nonzero any all atan2 fmod remainder maximum minimum addmm baddbmm chain_matmul quantile median mode
        std_mean var_mean channels_last contiguous_format preserve_format memory_format inf nan pi e
        is_inference_mode_enabled empty_strided complex real imag view_as_real view_as_complex polar angle""",
    "torch.nn": """Module Sequential ModuleList ModuleDict ParameterList ParameterDict Parameter Linear Bilinear
        Identity Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d MaxPool1d MaxPool2d
        MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveMaxPool2d
        BatchNorm1d BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm2d RMSNorm LocalResponseNorm
        Dropout Dropout1d Dropout2d Dropout3d AlphaDropout Embedding EmbeddingBag RNN LSTM GRU RNNCell
        LSTMCell GRUCell Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
        TransformerDecoderLayer MultiheadAttention ReLU ReLU6 LeakyReLU PReLU ELU SELU CELU GELU SiLU Mish
        Sigmoid Tanh Softmax LogSoftmax Softplus Softsign Hardtanh Hardswish Hardsigmoid Threshold Flatten
        Unflatten PixelShuffle PixelUnshuffle Upsample UpsamplingNearest2d UpsamplingBilinear2d ZeroPad2d
        ConstantPad2d ReflectionPad2d ReplicationPad2d MSELoss L1Loss SmoothL1Loss HuberLoss CrossEntropyLoss
        NLLLoss BCELoss BCEWithLogitsLoss KLDivLoss CosineEmbeddingLoss MarginRankingLoss TripletMarginLoss
        CTCLoss PoissonNLLLoss GaussianNLLLoss MultiLabelSoftMarginLoss CosineSimilarity PairwiseDistance
        functional init utils parallel modules parameter Fold Unfold ChannelShuffle LazyLinear
        DataParallel""",
    "torch.nn.functional": """relu relu6 leaky_relu gelu silu mish elu selu celu sigmoid tanh softmax log_softmax
        softplus softsign hardtanh hardswish dropout dropout1d dropout2d dropout3d alpha_dropout linear
        bilinear conv1d conv2d conv3d conv_transpose1d conv_transpose2d max_pool1d max_pool2d avg_pool1d avg_pool2d
        adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool2d batch_norm layer_norm group_norm
        instance_norm rms_norm normalize embedding one_hot pad interpolate upsample grid_sample affine_grid
        pixel_shuffle unfold fold cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss
        binary_cross_entropy binary_cross_entropy_with_logits kl_div cosine_similarity pairwise_distance
        scaled_dot_product_attention multi_head_attention_forward glu logsigmoid gumbel_softmax
        triplet_margin_loss margin_ranking_loss cosine_embedding_loss ctc_loss poisson_nll_loss
        gaussian_nll_loss softmin tanhshrink hardsigmoid threshold""",
    "torch.nn.init": """uniform_ normal_ constant_ ones_ zeros_ eye_ dirac_ xavier_uniform_ xavier_normal_
        kaiming_uniform_ kaiming_normal_ trunc_normal_ orthogonal_ sparse_ calculate_gain""",
    "torch.nn.utils": """clip_grad_norm_ clip_grad_value_ parameters_to_vector vector_to_parameters weight_norm
        spectral_norm rnn parametrizations parametrize""",
    "torch.nn.utils.rnn": "pack_padded_sequence pad_packed_sequence pad_sequence pack_sequence PackedSequence",
    "torch.nn.modules": "Module Linear Conv2d loss module batchnorm conv linear activation container dropout",
    "torch.nn.modules.loss": "_Loss _WeightedLoss MSELoss CrossEntropyLoss",
    "torch.nn.modules.module": "Module",
    "torch.nn.modules.batchnorm": "_BatchNorm _NormBase BatchNorm2d",
    "torch.nn.modules.conv": "_ConvNd Conv2d",
    "torch.nn.parameter": "Parameter Buffer UninitializedParameter",
    "torch.optim": """Optimizer SGD Adam AdamW RMSprop Adagrad Adadelta Adamax NAdam RAdam LBFGS
        lr_scheduler""",
    "torch.optim.lr_scheduler": """LRScheduler StepLR MultiStepLR ExponentialLR CosineAnnealingLR ReduceLROnPlateau
        OneCycleLR CyclicLR LambdaLR LinearLR ConstantLR SequentialLR CosineAnnealingWarmRestarts PolynomialLR
        ChainedScheduler MultiplicativeLR""",
    "torch.optim.optimizer": "Optimizer",
    "torch.utils.data": """Dataset IterableDataset TensorDataset DataLoader Subset ConcatDataset random_split
        Sampler SequentialSampler RandomSampler SubsetRandomSampler WeightedRandomSampler BatchSampler
        default_collate get_worker_info DistributedSampler ChainDataset StackDataset""",
    "torch.utils.data.dataloader": "DataLoader default_collate",
    "torch.utils.data.sampler": "Sampler RandomSampler",
    "torch.utils.checkpoint": "checkpoint checkpoint_sequential",
    "torch.autograd": """grad backward Function Variable gradcheck gradgradcheck no_grad enable_grad
        set_grad_enabled detect_anomaly set_detect_anomaly functional graph forward_ad""",
    "torch.autograd.functional": "jacobian hessian vjp jvp hvp vhp",
    "torch.backends": "cudnn mps cuda mkldnn opt_einsum",
    "torch.backends.cudnn": "benchmark deterministic enabled allow_tf32 is_available version",
    "torch.backends.mps": "is_available is_built",
    "torch.backends.cuda": "matmul sdp_kernel flash_sdp_enabled enable_flash_sdp is_built",
    "torch.cuda": """is_available device_count current_device get_device_name manual_seed manual_seed_all
        synchronize empty_cache memory_allocated max_memory_allocated reset_peak_memory_stats
        is_bf16_supported amp set_device device""",
    "torch.cuda.amp": "autocast GradScaler",
    "torch.amp": "autocast GradScaler",
    "torch.accelerator": "is_available current_accelerator device_count",
    "torch.onnx": "export",
    "torch.jit": "script trace ignore unused export is_scripting save load",
    "torch.serialization": "add_safe_globals safe_globals get_safe_globals",
    "torch.testing": "assert_close make_tensor",
    "torch.hub": "load load_state_dict_from_url get_dir download_url_to_file",
    "torch.random": "manual_seed seed initial_seed get_rng_state set_rng_state fork_rng",
    "torch.distributions": """Normal Categorical Bernoulli Uniform MultivariateNormal Beta Gamma Dirichlet
        kl_divergence Independent TransformedDistribution""",
    "torch.linalg": "norm vector_norm matrix_norm inv solve det eigh svd qr cholesky pinv lstsq",
    "torch.fft": "fft ifft rfft irfft fft2 fftn fftfreq",
    "torch.special": "expit logit erf gammaln entr",
}


def _names(spec):
    return spec.split()


def _torch_public(path):
    """PyTorch 2.13's own public names of ``path`` (its __all__, else dir() without _names)."""
    try:
        mod = importlib.import_module(path)
    except Exception:  # noqa: BLE001
        return []
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in dir(mod) if not n.startswith("_") and not inspect.ismodule(getattr(mod, n, None))]
    return sorted(set(names))


def _provided(vpath, name):
    """'yes', 'refused' (present, and using it raises an error saying why it is not supported:
    marked ``__varlens_unsupported__`` or an UnsupportedDtype) or 'no'."""
    try:
        mod = importlib.import_module(vpath)
    except Exception:  # noqa: BLE001  (ImportError, or the module refusing)
        return "no"
    try:
        obj = getattr(mod, name)
    except Exception:  # noqa: BLE001
        # a submodule that is imported on demand
        try:
            obj = importlib.import_module(f"{vpath}.{name}")
        except Exception:  # noqa: BLE001
            return "no"
    from varlens.core.dtypes import UnsupportedDtype
    if isinstance(obj, UnsupportedDtype) or getattr(obj, "__varlens_unsupported__", False) is True:
        return "refused"
    return "yes"


def survey(lists):
    rows = []
    for path, names in lists.items():
        vpath = "varlens" + path[len("torch"):]
        try:
            importlib.import_module(vpath)
            mod_ok = True
        except Exception:  # noqa: BLE001
            mod_ok = False
        status = {n: _provided(vpath, n) for n in names}
        missing = [n for n in names if status[n] == "no"]
        refused = [n for n in names if status[n] == "refused"]
        rows.append((path, mod_ok, len(names), len(names) - len(missing), missing, refused))
    return rows


def _print(title, rows, show_missing):
    tot = sum(r[2] for r in rows)
    got = sum(r[3] for r in rows)
    ref = sum(len(r[5]) for r in rows)
    mods = sum(r[1] for r in rows)
    print(f"\n{title}: {got}/{tot} names present ({100 * got / max(tot, 1):.1f}%): {got - ref} work, {ref} refuse "
          f"with a message saying why; {mods}/{len(rows)} module paths import")
    for path, mod_ok, n, k, missing, refused in rows:
        flag = "" if mod_ok else "  (module does not import)"
        extra = f"  ({len(refused)} refuse)" if refused else ""
        print(f"  {path:32s} {k:4d}/{n:<4d}{flag}{extra}")
        if show_missing and missing:
            print("      missing: " + " ".join(missing))
        if show_missing and refused:
            print("      refused: " + " ".join(refused))
    return got, tot, ref


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--missing", action="store_true", help="list every missing name")
    ap.add_argument("--no-full", action="store_true", help="skip the full torch __all__ survey")
    args = ap.parse_args(argv)
    common = {k: _names(v) for k, v in COMMON.items()}
    got, tot, ref = _print("COMMON (names public programs use)", survey(common), args.missing)
    if not args.no_full:
        import torch
        full = {p: _torch_public(p) for p in COMMON}
        _print(f"FULL (every public name of those modules in torch {torch.__version__})",
                            survey(full), args.missing)
    return got, tot, ref


if __name__ == "__main__":
    sys.path.insert(0, ".")
    main()
