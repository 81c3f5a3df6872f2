"""Planner: the hardware catalogue, roofline bounds and the predicted execution graph."""

from engine.planner.graph import BatchConfig, Graph, predict_graph, predict_trace_graph

__all__ = ["BatchConfig", "Graph", "predict_graph", "predict_trace_graph"]
