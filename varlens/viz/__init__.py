"""See the recorded graph: ``draw_graph(output, params=...)`` renders it with Graphviz.

Each node shows the op (or the parameter's name), its shape and dtype, a summary of its value
and, once backward has run, of its gradient ("not computed" before that).  Graphs built inside
``varlens.viz.capture()`` also carry the values and gradients of intermediate results.
"""
from varlens.viz.graph import Graph, GraphNode, build_graph, capture, draw_graph, summarize

__all__ = ["Graph", "GraphNode", "build_graph", "capture", "draw_graph", "summarize"]
