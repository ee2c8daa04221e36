"""SummaryWriter with PyTorch's API over the ``tensorboard`` package's event writer.

Each ``add_*`` builds one ``Summary`` protocol buffer and appends it to the run's event file
(``events.out.tfevents.<time>.<host>``); TensorBoard (``tensorboard --logdir DIR``) and its
``EventAccumulator`` read them back.  Values may be Python numbers, NumPy arrays or varlens
Tensors; nothing of the caller's graph is kept (values are detached and copied to NumPy).
"""
from __future__ import annotations

import io
import math
import os
import socket
import time

import numpy as np


def _tb():
    """The tensorboard modules we need, with PyTorch's message when the package is missing."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:  # pragma: no cover - the test extra installs tensorboard
        raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above; "
                          "install it with `pip install tensorboard`") from e
    return event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, api_pb2, plugin_data_pb2, EventFileWriter


def _numpy(x, name):
    """A NumPy copy of a number, array or Tensor (detached)."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return np.asarray(x.detach().numpy())
    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - re-raised with the argument's name
        raise TypeError(f"SummaryWriter: {name} must be a number, array or Tensor, got {type(x).__name__}") from e


def _scalar(x, name):
    a = _numpy(x, name)
    if a.size != 1:
        raise ValueError(f"SummaryWriter: {name} must hold one value, got shape {tuple(a.shape)}")
    return float(a.reshape(()))


def _png(img_hwc_uint8):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(img_hwc_uint8).save(buf, format="PNG")
    return buf.getvalue()


def _to_hwc(img, dataformats):
    """An image array in ``dataformats`` (CHW, HWC, HW, NCHW...) as an HWC uint8 array."""
    a = _numpy(img, "img_tensor")
    fmt = dataformats.upper()
    if a.ndim != len(fmt):
        raise ValueError(f"add_image: dataformats {dataformats!r} expects a {len(fmt)}-D image, "
                         f"got shape {tuple(a.shape)}")
    if fmt == "HW":
        a = a[:, :, None]
    elif fmt == "CHW":
        a = a.transpose(1, 2, 0)
    elif fmt != "HWC":
        raise ValueError(f"add_image: dataformats must be one of 'CHW', 'HWC', 'HW', got {dataformats!r}")
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    if a.dtype != np.uint8:   # floats in [0, 1], as PyTorch expects
        a = (np.clip(a.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(a)


class SummaryWriter:
    """Writes entries to event files in ``log_dir`` for TensorBoard to read (PyTorch's SummaryWriter).

    ``log_dir`` defaults to ``runs/<date>_<host><comment>`` as in PyTorch.  ``purge_step``,
    ``max_queue`` and ``flush_secs`` have PyTorch's meanings.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if log_dir is None:
            stamp = time.strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs, self.filename_suffix = max_queue, flush_secs, filename_suffix
        self._pb = _tb()
        self._writer = self._pb[6](self.log_dir, max_queue, flush_secs, filename_suffix)
        self._children = {}
        if purge_step is not None:
            self._add_event(self._pb[0].Event(step=purge_step, file_version="brain.Event:2"))
            self._add_event(self._pb[0].Event(step=purge_step, session_log=self._pb[0].SessionLog(
                status=self._pb[0].SessionLog.START)))

    # ------------------------------------------------------------------ plumbing
    def get_logdir(self):
        return self.log_dir

    def _add_event(self, event):
        if self._writer is None:
            raise RuntimeError("SummaryWriter: the writer was closed; create a new one")
        self._writer.add_event(event)

    def _add_summary(self, summary, global_step=None, walltime=None):
        ev = self._pb[0].Event(summary=summary, wall_time=time.time() if walltime is None else float(walltime))
        if global_step is not None:
            ev.step = int(global_step)
        self._add_event(ev)

    def _value(self, tag, **kw):
        summary_pb2 = self._pb[1]
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=str(tag), **kw)])

    # ------------------------------------------------------------------ the API
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One point of the scalar series ``tag``."""
        v = _scalar(scalar_value, "scalar_value")
        self._add_summary(self._value(tag, simple_value=v), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several series in one chart: each goes to the run ``<log_dir>/<main_tag>_<tag>`` as in PyTorch."""
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"add_scalars: tag_scalar_dict must be a dict, got {type(tag_scalar_dict).__name__}")
        for tag, value in tag_scalar_dict.items():
            key = f"{main_tag.replace('/', '_')}_{tag}"
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = SummaryWriter(os.path.join(self.log_dir, key), max_queue=self.max_queue,
                                                            flush_secs=self.flush_secs,
                                                            filename_suffix=self.filename_suffix)
            child.add_scalar(main_tag, value, global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """A histogram of ``values`` (bins: 'tensorflow' (exponential), 'auto', or an int / NumPy rule)."""
        a = _numpy(values, "values").astype(np.float64).ravel()
        if a.size == 0:
            raise ValueError("add_histogram: values is empty")
        if not np.all(np.isfinite(a)):
            raise ValueError("add_histogram: values holds NaN or Inf")
        if isinstance(bins, str) and bins == "tensorflow":
            edges = _tf_bucket_limits(float(np.abs(a).max()))
        else:
            edges = np.histogram_bin_edges(a, bins=bins)[1:]
        counts, _ = np.histogram(a, bins=np.concatenate([[-np.inf], edges[:-1], [np.inf]]))
        nz = np.flatnonzero(counts)          # drop the empty buckets outside [min, max]
        lo, hi = max(nz[0] - 1, 0), nz[-1] + 1
        edges, counts = edges[lo:hi], counts[lo:hi]
        hist = self._pb[1].HistogramProto(min=float(a.min()), max=float(a.max()), num=float(a.size),
                                          sum=float(a.sum()), sum_squares=float(a @ a),
                                          bucket_limit=[float(e) for e in edges],
                                          bucket=[float(c) for c in counts])
        self._add_summary(self._value(tag, histo=hist), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """An image: floats in [0, 1] or uint8 in [0, 255], layout ``dataformats``."""
        a = _to_hwc(img_tensor, dataformats)
        img = self._pb[1].Summary.Image(height=a.shape[0], width=a.shape[1], colorspace=a.shape[2],
                                        encoded_image_string=_png(a))
        self._add_summary(self._value(tag, image=img), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch of images tiled into one grid image."""
        a = _numpy(img_tensor, "img_tensor")
        if dataformats.upper() == "NHWC":
            a = a.transpose(0, 3, 1, 2)
        elif dataformats.upper() != "NCHW":
            raise ValueError(f"add_images: dataformats must be 'NCHW' or 'NHWC', got {dataformats!r}")
        n, c, h, w = a.shape
        cols = int(math.ceil(math.sqrt(n)))
        rows = int(math.ceil(n / cols))
        grid = np.zeros((c, rows * h, cols * w), dtype=a.dtype)
        for i in range(n):
            r, q = divmod(i, cols)
            grid[:, r * h:(r + 1) * h, q * w:(q + 1) * w] = a[i]
        self.add_image(tag, grid, global_step, walltime, dataformats="CHW")

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them), rendered to an image."""
        figs = figure if isinstance(figure, (list, tuple)) else [figure]
        imgs = []
        for fig in figs:
            fig.canvas.draw()
            rgba = np.asarray(fig.canvas.buffer_rgba())
            imgs.append(rgba[:, :, :3].copy())
            if close:
                import matplotlib.pyplot as plt
                plt.close(fig)
        if len(imgs) == 1:
            self.add_image(tag, imgs[0], global_step, walltime, dataformats="HWC")
        else:
            self.add_images(tag, np.stack(imgs), global_step, walltime, dataformats="NHWC")

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Markdown text, shown by TensorBoard's text plugin."""
        _, summary_pb2, tensor_pb2, tensor_shape_pb2 = self._pb[:4]
        meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        tensor = tensor_pb2.TensorProto(dtype="DT_STRING", string_val=[str(text_string).encode("utf-8")],
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto(
                                            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
        self._add_summary(self._value(f"{tag}/text_summary", metadata=meta, tensor=tensor), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """One trial's hyperparameters and metrics for TensorBoard's HPARAMS tab (written to a sub-run)."""
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("add_hparams: hparam_dict and metric_dict must be dicts")
        _, summary_pb2, _, _, api_pb2, plugin_data_pb2, _ = self._pb
        infos, values = [], {}
        for k, v in hparam_dict.items():
            if isinstance(v, bool):
                infos.append(api_pb2.HParamInfo(name=k, type=api_pb2.DATA_TYPE_BOOL))
            elif isinstance(v, (int, float)) or hasattr(v, "item"):
                infos.append(api_pb2.HParamInfo(name=k, type=api_pb2.DATA_TYPE_FLOAT64))
                values[k] = float(_scalar(v, f"hparam_dict[{k!r}]"))
            elif isinstance(v, str):
                infos.append(api_pb2.HParamInfo(name=k, type=api_pb2.DATA_TYPE_STRING))
                values[k] = v
            else:
                raise ValueError(f"add_hparams: value of {k!r} must be bool, int, float, str or a Tensor, "
                                 f"got {type(v).__name__}")
        metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=k)) for k in metric_dict]
        exp = api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics)
        start = plugin_data_pb2.SessionStartInfo()
        for k, v in hparam_dict.items():
            if isinstance(v, bool):
                start.hparams[k].bool_value = v
            elif isinstance(v, str):
                start.hparams[k].string_value = v
            else:
                start.hparams[k].number_value = values[k]
        end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)

        def plugin(tag, **kw):
            content = plugin_data_pb2.HParamsPluginData(version=0, **kw)
            meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
                plugin_name="hparams", content=content.SerializeToString()))
            return self._value(tag, metadata=meta)

        run = os.path.join(self.log_dir, run_name or str(time.time()))
        with SummaryWriter(run) as w:
            w._add_summary(plugin("_hparams_/experiment", experiment=exp))
            w._add_summary(plugin("_hparams_/session_start_info", session_start_info=start))
            w._add_summary(plugin("_hparams_/session_end_info", session_end_info=end))
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def flush(self):
        if self._writer is not None:
            self._writer.flush()
        for child in self._children.values():
            child.flush()

    def close(self):
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
        for child in self._children.values():
            child.close()
        self._children = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _tf_bucket_limits(max_abs):
    """TensorFlow's default histogram buckets: +-1e-12 * 1.1^k up to max|x| (as PyTorch's 'tensorflow')."""
    pos, v = [], 1e-12
    while v < max(max_abs, 1e-12) * 1.1:
        pos.append(v)
        v *= 1.1
    pos = np.array(pos)
    return np.concatenate([-pos[::-1], [0.0], pos, [np.inf]])
