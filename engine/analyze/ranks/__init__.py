"""Many ranks of one job, in the order the work runs:

* ``summary`` — ``summarize(trace)``: what crossing ranks needs of one rank, a few kB, made where
  the rank is read (never its events);
* ``groups`` — which ranks are one job (workload fingerprints, profile times), and why not;
* ``matching`` — each collective matched across ranks (op, group, sequence or ordinal; SendRecv
  kernels that name nothing by order and ends), the clocks aligned, the links' rates;
* ``model`` — what it says (cross_rank.json's model: skews, stragglers, outliers, links);
* ``ranks`` — ``cross_rank(summaries)``: who waited for whom, the straggler per step, the job's
  verdict; ``peer_bounds`` for holding each rank's gains to its peers. The rest of the tool
  imports from here only.

``synth_ranks`` writes SYNTHETIC ranks to try it on (``python -m
engine.analyze.ranks.synth_ranks``). Imports breakdown and advice below it.
"""
