"""Two analyses compared (``gitm-tui diff``): ``diff.diff_paths``, ``diff_traces`` and
``diff_results``, and their model (``diff_model``): what moved, by kernel, class, stream and
critical-path part.
"""
