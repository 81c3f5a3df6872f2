"""Optimizer (DESIGN §5–6): replay graph, monitor, attribution, the loop's steps, report."""
