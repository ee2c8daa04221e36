"""Backprop, step by step: ``explain(loss)`` walks the backward pass one node at a time.

It runs the same algorithm as the engine (varlens.core.engine), written out plainly so every
step can be shown: visit the nodes consumers-first; at each node take the gradient that has
arrived at its output, apply the node's backward (the derivative its Function states), sum each
result back to its input's shape (undoing broadcasting) and add it to what that input has
received so far.  Leaves end with exactly the gradients ``loss.backward()`` would give them
(a test holds the two together); ``explain`` itself writes no ``.grad`` and frees nothing, so
the graph stays usable.

``Explanation.text()`` prints the walk in a terminal; ``Explanation.html(path)`` writes a
self-contained page where a student steps forward and back through the nodes with the graph
(drawn by Graphviz when it is installed) highlighted.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from varlens.core.array import sum_to
from varlens.core.engine import _toposort
from varlens.core.function import Function
from varlens.core.grad_mode import no_grad
from varlens.core.tensor import Tensor
from varlens.viz.graph import NOT_COMPUTED, Graph, GraphNode, _derivative_text, render, summarize

_MAX_LISTED = 64      # tensors up to this many entries carry their values in the page


@dataclasses.dataclass
class Edge:
    """What one backward step sends to one input."""
    input_id: str
    input_label: str
    shape: tuple
    summary: str
    values: list | None


@dataclasses.dataclass
class Step:
    """One node of the backward walk."""
    index: int
    node_id: str
    op: str
    derivative: str
    grad_in_shape: tuple
    grad_in: str
    grad_in_values: list | None
    sends: list


def _values(a):
    a = np.asarray(a)
    return a.astype(np.float64).ravel().tolist() if a.size <= _MAX_LISTED and a.dtype.kind in "fiub" else None


class Explanation:
    """The backward walk: ``steps`` (one per node, in the order the engine visits them),
    ``grads`` (leaf name -> gradient array), ``graph`` (the drawn graph with every gradient)."""

    def __init__(self, steps, grads, graph, leaf_grads_by_tensor):
        self.steps = steps
        self.grads = grads
        self.graph = graph
        self._by_tensor = leaf_grads_by_tensor

    def grad_of(self, tensor):
        """The gradient this walk computed for a leaf Tensor (None if the loss does not reach it)."""
        return self._by_tensor.get(id(tensor))

    def __len__(self):
        return len(self.steps)

    def text(self):
        lines = [f"backward pass: {len(self.steps)} step(s), consumers before producers"]
        for s in self.steps:
            lines.append(f"\nstep {s.index + 1}/{len(self.steps)}: {s.op}")
            lines.append(f"  derivative: {s.derivative}")
            lines.append(f"  gradient arriving at its output {s.grad_in_shape}: {s.grad_in}")
            for e in s.sends:
                lines.append(f"  -> to {e.input_label} {e.shape}: {e.summary}")
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    def to_dict(self):
        return {"steps": [dataclasses.asdict(s) for s in self.steps]}

    def html(self, path=None):
        """A self-contained HTML page stepping through the walk; written to ``path`` if given."""
        try:
            svg = render(self.graph.dot, "svg").decode("utf-8")
            svg = svg[svg.find("<svg"):]
        except RuntimeError as e:      # no Graphviz: the page works without the picture
            svg = f"<p class='nograph'>{e}</p>"
        page = _PAGE.replace("__SVG__", svg).replace("__STEPS__", json.dumps(self.to_dict()["steps"]))
        if path is not None:
            tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(page)
            os.replace(tmp, path)
        return page


def explain(loss, params=None, grad=None, print_steps=False):
    """Walk the backward pass of ``loss`` node by node and return an :class:`Explanation`.

    ``params``: mapping name -> Tensor naming the leaves (``dict(model.named_parameters())``);
    ``grad``: the gradient of ``loss`` (default 1 for a scalar, as ``backward()``);
    ``print_steps=True`` also prints the walk.
    """
    if not isinstance(loss, Tensor):
        raise TypeError(f"explain: loss must be a varlens Tensor, got {type(loss).__name__}")
    if loss._node is None:
        raise RuntimeError("explain: loss does not require grad (it was not computed from tensors with "
                           "requires_grad=True), so there is no backward pass to walk")
    if grad is None:
        if loss._data.size != 1:
            raise RuntimeError(f"explain: grad can be implicitly created only for scalar outputs; loss has "
                               f"shape {tuple(loss.shape)}, pass grad=")
        g0 = np.ones_like(loss._data)
    else:
        g0 = np.asarray(grad._data if isinstance(grad, Tensor) else grad, dtype=loss._data.dtype)
        if g0.shape != loss._data.shape:
            raise ValueError(f"explain: grad has shape {g0.shape}, expected loss's shape {loss._data.shape}")
    names = {id(t): str(k) for k, t in (params or {}).items()}
    order = _toposort([loss._node])
    ids, labels = {}, {}

    def key(obj):
        if id(obj) not in ids:
            ids[id(obj)] = f"n{len(ids)}"
            labels[id(obj)] = (type(obj).__name__ if isinstance(obj, Function)
                               else f"leaf '{names.get(id(obj), 'tensor')}'")
        return ids[id(obj)]

    arriving = {loss._node: g0}
    leaf_grads = {}
    steps = []
    with no_grad():
        for node in order:
            g = arriving.pop(node, None)
            if g is None:
                continue
            if node.saved is None:
                raise RuntimeError(f"explain: the graph was freed by an earlier backward (at {type(node).__name__}); "
                                   "call explain before backward(), or backward(retain_graph=True)")
            gin = node.backward(g)
            gin = gin if type(gin) is tuple else (gin,)
            sends = []
            for p, gi in zip(node.next, gin):
                if p is None or gi is None:
                    continue
                gi = np.asarray(gi._data if isinstance(gi, Tensor) else gi)
                shape = p._oshape if isinstance(p, Function) else p._data.shape
                dtype = p._odtype if isinstance(p, Function) else p._data.dtype
                gi = sum_to(gi, shape).astype(dtype, copy=False)
                if isinstance(p, Function):
                    arriving[p] = gi if p not in arriving else arriving[p] + gi
                else:
                    leaf_grads[id(p)] = (p, gi if id(p) not in leaf_grads else leaf_grads[id(p)][1] + gi)
                sends.append(Edge(key(p), labels[id(p)], tuple(shape), summarize(gi), _values(gi)))
            steps.append(Step(len(steps), key(node), type(node).__name__, _derivative_text(node),
                              tuple(np.shape(g)), summarize(g), _values(g), sends))
    # the drawn graph, every node carrying the gradient the walk computed for it
    node_grads = {s.node_id: s.grad_in for s in steps}
    gnodes = []
    for node in order:
        nid = key(node)
        gnodes.append(GraphNode(nid, "output" if node is loss._node else "op", type(node).__name__,
                                tuple(node._oshape), str(node._odtype),
                                summarize(loss._data) if node is loss._node else "not recorded",
                                node_grads.get(nid, NOT_COMPUTED),
                                [key(p) for p in node.next if p is not None], derivative=_derivative_text(node)))
        for p in node.next:
            if p is not None and not isinstance(p, Function) and key(p) not in {n.id for n in gnodes}:
                lg = leaf_grads.get(id(p))
                gnodes.append(GraphNode(key(p), "leaf", names.get(id(p), "tensor"), tuple(p._data.shape),
                                        str(p._data.dtype), summarize(p._data),
                                        summarize(lg[1]) if lg else NOT_COMPUTED, []))
    grads = {names.get(k, f"tensor{i}"): v[1] for i, (k, v) in enumerate(leaf_grads.items())}
    out = Explanation(steps, grads, Graph(gnodes), {k: v[1] for k, v in leaf_grads.items()})
    if print_steps:
        print(out.text())
    return out


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>varlens: backprop, step by step</title>
<style>
body { font-family: sans-serif; margin: 1em; }
#wrap { display: flex; gap: 2em; align-items: flex-start; }
#graph { flex: 0 0 55%; max-height: 85vh; overflow: auto; border: 1px solid #ccc; }
#graph svg { width: 100%; height: auto; }
#panel { min-width: 30em; }
.node.current polygon, .node.current path { stroke: #d62728; stroke-width: 4px; }
.node.sent polygon { stroke: #1f77b4; stroke-width: 3px; }
code { background: #f4f4f4; padding: 0 .2em; }
button { font-size: 1.1em; margin-right: .5em; }
</style></head>
<body>
<h2>Backprop, step by step</h2>
<p>Each step takes the gradient arriving at one node's output, applies that node's derivative and
sends one gradient to each input. Consumers come before producers, as in the engine.</p>
<div><button id="prev">&larr; previous</button><button id="next">next &rarr;</button>
<span id="counter"></span></div>
<div id="wrap"><div id="graph">__SVG__</div>
<div id="panel">
<h3 id="op"></h3>
<p><b>derivative:</b> <span id="derivative"></span></p>
<p><b>gradient arriving at the output</b> <span id="gin-shape"></span>: <code id="gin"></code></p>
<p><b>gradients sent to the inputs:</b></p><ul id="sends"></ul>
</div></div>
<script>
const steps = __STEPS__;
let k = 0;
function fmt(v) { return v.map(x => Number(x).toPrecision(4)).join(", "); }
function show() {
  const s = steps[k];
  document.getElementById("counter").textContent = "step " + (k + 1) + " of " + steps.length;
  document.getElementById("op").textContent = s.op;
  document.getElementById("derivative").textContent = s.derivative;
  document.getElementById("gin-shape").textContent = "(" + s.grad_in_shape.join(", ") + ")";
  document.getElementById("gin").textContent = s.grad_in_values ? "[" + fmt(s.grad_in_values) + "]" : s.grad_in;
  document.getElementById("gin").dataset.values = JSON.stringify(s.grad_in_values);
  const ul = document.getElementById("sends");
  ul.innerHTML = "";
  for (const e of s.sends) {
    const li = document.createElement("li");
    li.className = "send";
    li.dataset.values = JSON.stringify(e.values);
    li.textContent = "to " + e.input_label + " (" + e.shape.join(", ") + "): " +
                     (e.values ? "[" + fmt(e.values) + "]" : e.summary);
    ul.appendChild(li);
  }
  document.querySelectorAll(".node").forEach(n => n.classList.remove("current", "sent"));
  const cur = document.getElementById(s.node_id);
  if (cur) { cur.classList.add("current"); cur.scrollIntoView({block: "nearest", inline: "nearest"}); }
  for (const e of s.sends) { const n = document.getElementById(e.input_id); if (n) n.classList.add("sent"); }
  document.getElementById("prev").disabled = k === 0;
  document.getElementById("next").disabled = k === steps.length - 1;
}
const svg = document.querySelector("#graph svg");
if (svg) { svg.removeAttribute("width"); svg.removeAttribute("height"); }   // scale the graph to the panel
document.getElementById("next").onclick = () => { if (k < steps.length - 1) { k++; show(); } };
document.getElementById("prev").onclick = () => { if (k > 0) { k--; show(); } };
document.addEventListener("keydown", ev => {
  if (ev.key === "ArrowRight") document.getElementById("next").click();
  if (ev.key === "ArrowLeft") document.getElementById("prev").click();
});
show();
</script></body></html>
"""
