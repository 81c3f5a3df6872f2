"""Dashboard widgets, one per module."""
