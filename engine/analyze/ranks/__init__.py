"""Many ranks of one job: ``ranks.summarize`` (a few kB per rank, made where the rank is read) and
``ranks.cross_rank`` (collectives matched across ranks, skew vs transfer, stragglers, who waits
for whom, the job's verdict and critical path); ``synth_ranks`` writes SYNTHETIC ranks to try
it on (``python -m engine.analyze.ranks.synth_ranks``). Imports breakdown and advice below it.
"""
