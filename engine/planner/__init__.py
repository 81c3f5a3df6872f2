"""Planner: hardware catalogue and roofline bounds (the predicted graph arrives with issue #4)."""
