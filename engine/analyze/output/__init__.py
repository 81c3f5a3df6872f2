"""What `analyze` writes: ``export`` (analysis.json, report.md, perfetto.json of one file, and
the committed schema) and ``rank_export`` (cross_rank.json, cross_rank.md and the merged
ranks.perfetto.json.gz of a job).
"""
