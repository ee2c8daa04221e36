"""The recorded autograd graph as a picture (micrograd's ``draw_dot``, with shapes and gradients).

``build_graph`` walks from an output Tensor through ``grad_fn`` and each node's inputs, the same
edges the backward engine follows (varlens.core.engine), and returns plain ``GraphNode`` records;
``Graph.dot`` writes them in Graphviz's DOT language and ``Graph.save`` runs Graphviz's ``dot``
program to make SVG or PNG.  Nothing here changes the graph or runs a backward pass.

What a node can show depends on what was kept:

* the output and every leaf (parameters, inputs) carry their value; a leaf carries its ``.grad``
  once backward has run;
* an intermediate result's value and gradient are not kept by the engine (that is what makes
  training memory-light), so they read "not recorded" unless the graph was built inside
  ``capture()``, which stores a summary of each op's output as it is computed and of its
  gradient when backward reaches it.
"""
from __future__ import annotations

import collections
import dataclasses
import html
import os
import shutil
import subprocess
import tempfile
import weakref

import numpy as np

from varlens.core import function as _function
from varlens.core.function import Function
from varlens.core.tensor import Tensor

NOT_COMPUTED = "not computed"
NOT_RECORDED = "not recorded (build the graph inside varlens.viz.capture())"


def summarize(a, max_values=8):
    """A one-line summary of an array: its values when small, else mean/std/min/max."""
    a = np.asarray(a)
    if a.size == 0:
        return "empty"
    if a.dtype.kind not in "fiub" or a.size <= max_values:
        flat = a.ravel()
        if a.dtype.kind == "f":
            return "[" + ", ".join(f"{v:.4g}" for v in flat) + "]"
        return "[" + ", ".join(str(v) for v in flat) + "]"
    f = a.astype(np.float64)
    fin = np.isfinite(f)
    bad = int(f.size - fin.sum())
    g = f[fin] if bad else f
    if g.size == 0:
        return f"all {f.size} non-finite"
    s = f"mean {g.mean():.4g} std {g.std():.4g} min {g.min():.4g} max {g.max():.4g}"
    return s + (f" ({bad} NaN/Inf)" if bad else "")


@dataclasses.dataclass
class GraphNode:
    """One node of the drawn graph."""
    id: str
    kind: str                 # "op", "leaf" or "output"
    label: str                # op name (e.g. "Matmul") or the leaf's name
    shape: tuple
    dtype: str
    value: str                # summary of the value, or NOT_RECORDED
    grad: str                 # summary of the gradient, NOT_COMPUTED or NOT_RECORDED
    inputs: list              # ids of the nodes this one reads
    module: str = ""          # module path (from the parameter names), used to collapse
    derivative: str = ""      # the first line of the op's stated derivative


class capture:
    """Within this context every op's output value (a summary) is recorded, and, when backward
    later runs through those ops, the summary of the gradient arriving at each of them.

    It chains with whatever already watches ops (the variance lens) instead of replacing it.
    """

    def __init__(self):
        self.values = weakref.WeakKeyDictionary()   # node -> value summary
        self.grads = weakref.WeakKeyDictionary()    # node -> gradient summary
        self._prev = None

    def _hook(self, cls, args, kwargs, res):
        if self._prev is not None:
            self._prev(cls, args, kwargs, res)
        node = res._node
        if node is None:
            return
        self.values[node] = summarize(res._data)
        grads = self.grads

        def grad_hook(g, node_ref=weakref.ref(node)):
            n = node_ref()
            if n is not None:
                grads[n] = summarize(g._data)
            return None
        if node.hooks is None:
            node.hooks = []
        node.hooks.append(grad_hook)

    def __enter__(self):
        self._prev = _function.op_hook
        _function.op_hook = self._hook
        _ALL_CAPTURES.append(self)
        return self

    def __exit__(self, *exc):
        _function.op_hook = self._prev
        return False


_ALL_CAPTURES = collections.deque(maxlen=16)   # recent captures: their tables name nodes' values and gradients


def _lookup(node, table_name):
    for cap in list(_ALL_CAPTURES):
        table = getattr(cap, table_name)
        if node in table:
            return table[node]
    return None


def _derivative_text(node):
    """The first sentence of what the op's backward says it computes (its docstring)."""
    for obj in (type(node), type(node).backward):
        doc = getattr(obj, "__doc__", None)
        if doc and obj is not Function.backward and obj is not Function:
            return " ".join(doc.strip().split("\n\n")[0].split())
    return "composed from smaller ops (no derivative stated)"


def op_name(node):
    return type(node).__name__


def build_graph(output, params=None):
    """The graph behind ``output`` as a list of GraphNode, output first, leaves last.

    ``params``: a mapping name -> Tensor (e.g. ``dict(model.named_parameters())``) that names
    the leaves; unnamed leaves are called "input".
    """
    if not isinstance(output, Tensor):
        raise TypeError(f"draw_graph: output must be a varlens Tensor, got {type(output).__name__}")
    names = {}
    if params is not None:
        if not hasattr(params, "items"):
            raise TypeError("draw_graph: params must be a mapping name -> Tensor "
                            f"(e.g. dict(model.named_parameters())), got {type(params).__name__}")
        names = {id(t): str(k) for k, t in params.items()}
    ids = {}
    nodes = []

    def key(obj):
        k = id(obj)
        if k not in ids:
            ids[k] = f"n{len(ids)}"
        return ids[k]

    root_node = output._node
    if root_node is None:   # a leaf alone
        nodes.append(_leaf_node(output, key(output), names, "output"))
        return nodes
    order, seen, stack = [], {root_node}, [root_node]
    while stack:                        # iterative walk over the engine's edges (node.next)
        n = stack.pop()
        order.append(n)
        for p in n.next:
            if p is not None and p not in seen:
                seen.add(p)
                if isinstance(p, Function):
                    stack.append(p)
                else:
                    order.append(p)
    for obj in order:
        if isinstance(obj, Function):
            is_root = obj is root_node
            value = summarize(output._data) if is_root else (_lookup(obj, "values") or NOT_RECORDED)
            g = _lookup(obj, "grads")
            if g is None:   # a captured node whose gradient has not arrived yet: backward has not run
                g = NOT_COMPUTED if (is_root or value != NOT_RECORDED) else NOT_RECORDED
            nodes.append(GraphNode(
                id=key(obj), kind="output" if is_root else "op", label=op_name(obj),
                shape=tuple(getattr(obj, "_oshape", ())), dtype=str(getattr(obj, "_odtype", "")),
                value=value, grad=g, inputs=[key(p) for p in obj.next if p is not None],
                derivative=_derivative_text(obj)))
        else:
            nodes.append(_leaf_node(obj, key(obj), names, "leaf"))
    _assign_modules(nodes)
    return nodes


def _leaf_node(t, nid, names, kind):
    name = names.get(id(t), "input" if not t.requires_grad else "tensor")
    grad = summarize(t.grad._data) if t.grad is not None else NOT_COMPUTED
    module = name.rsplit(".", 1)[0] if "." in name else ""
    return GraphNode(id=nid, kind=kind, label=name, shape=tuple(t._data.shape), dtype=str(t._data.dtype),
                     value=summarize(t._data), grad=grad, inputs=[], module=module)


def _assign_modules(nodes):
    """An op belongs to the module whose parameters it reads; an op that reads none belongs to
    the module of the op that produced its first input (so an activation joins the layer before it)."""
    by_id = {n.id: n for n in nodes}
    for n in reversed(nodes):            # leaves and producers first
        if n.kind == "leaf" or n.module:
            continue
        mods = [by_id[i].module for i in n.inputs if by_id[i].kind == "leaf" and by_id[i].module]
        if mods:
            n.module = mods[0]
        else:
            for i in n.inputs:
                if by_id[i].kind != "leaf" and by_id[i].module:
                    n.module = by_id[i].module
                    break


class Graph:
    """A drawn graph: ``.nodes``, ``.dot`` (Graphviz source), ``.save(path)`` for .svg/.png/.dot."""

    def __init__(self, nodes, collapse=False, highlight=None):
        self.nodes = nodes
        self.collapsed = collapse
        self.dot = _to_dot(nodes, collapse, highlight)

    def save(self, path, format=None):
        path = os.fspath(path)
        fmt = (format or os.path.splitext(path)[1].lstrip(".") or "svg").lower()
        if fmt == "dot":
            with open(path, "w") as f:
                f.write(self.dot)
            return path
        if fmt not in ("svg", "png", "pdf"):
            raise ValueError(f"Graph.save: format must be 'svg', 'png', 'pdf' or 'dot', got {fmt!r}")
        data = render(self.dot, fmt)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path

    def svg(self):
        return render(self.dot, "svg").decode("utf-8")

    def _repr_svg_(self):   # Jupyter shows the graph inline
        return self.svg()

    def __len__(self):
        return len(self.nodes)


def render(dot_source, fmt="svg"):
    """Run Graphviz's ``dot`` on DOT source and return the bytes it makes."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("draw_graph: Graphviz's `dot` program was not found on PATH; install Graphviz "
                           "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz). "
                           "Graph.dot holds the DOT source meanwhile.")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "g.dot")
        with open(src, "w") as f:
            f.write(dot_source)
        out = subprocess.run([exe, f"-T{fmt}", src], capture_output=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"draw_graph: dot failed: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout


def _esc(s):
    return html.escape(str(s), quote=True)


def _label(n):
    color = {"op": "#dbe9f6", "leaf": "#e4f3e0", "output": "#f9e1c8"}[n.kind]
    rows = [f'<TR><TD BGCOLOR="{color}"><B>{_esc(n.label)}</B></TD></TR>',
            f"<TR><TD>{_esc(tuple(n.shape))} {_esc(n.dtype)}</TD></TR>",
            f"<TR><TD>value: {_esc(n.value[:90])}</TD></TR>",
            f"<TR><TD>grad: {_esc(n.grad[:90])}</TD></TR>"]
    return '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def _to_dot(nodes, collapse, highlight):
    lines = ["digraph varlens {", '  rankdir=BT; node [shape=plaintext fontname="Helvetica" fontsize=10];']
    if collapse:
        groups = {}
        for n in nodes:
            groups.setdefault(n.module or "(top)", []).append(n)
        where = {n.id: (n.module or "(top)") for n in nodes}
        for i, (mod, members) in enumerate(groups.items()):
            ops = sorted({m.label for m in members if m.kind != "leaf"})
            nparams = sum(1 for m in members if m.kind == "leaf")
            label = (f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"><TR><TD BGCOLOR="#dbe9f6"><B>'
                     f'{_esc(mod)}</B></TD></TR><TR><TD>{len(members) - nparams} ops, {nparams} leaves</TD></TR>'
                     f'<TR><TD>{_esc(", ".join(ops)[:80])}</TD></TR></TABLE>>')
            lines.append(f'  g{i} [id="g{i}" label={label}];')
        gid = {mod: f"g{i}" for i, mod in enumerate(groups)}
        edges = set()
        for n in nodes:
            for i in n.inputs:
                a, b = gid[where[i]], gid[where[n.id]]
                if a != b:
                    edges.add((a, b))
        lines += [f"  {a} -> {b};" for a, b in sorted(edges)]
    else:
        for n in nodes:
            extra = ' color="red" penwidth=3' if highlight and n.id in highlight else ""
            lines.append(f'  {n.id} [id="{n.id}" label={_label(n)}{extra}];')
        for n in nodes:
            for i in n.inputs:
                lines.append(f"  {i} -> {n.id};")
    lines.append("}")
    return "\n".join(lines)


def draw_graph(output, params=None, path=None, collapse=None, max_nodes=120):
    """Draw the graph that produced ``output``; save it to ``path`` (.svg, .png, .pdf, .dot) if given.

    ``collapse``: group the nodes by module (the prefix of the parameter names they read); by
    default graphs of more than ``max_nodes`` nodes are collapsed.  Returns the ``Graph``.
    """
    nodes = build_graph(output, params)
    if collapse is None:
        collapse = len(nodes) > max_nodes
    g = Graph(nodes, collapse=collapse)
    if path is not None:
        g.save(path)
    return g
