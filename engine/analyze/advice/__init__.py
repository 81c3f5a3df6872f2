"""What would help: ``levers.replay_levers`` replays every lever of the library on the trace's
dependency graph (prediction, interval, ceiling, safety), ``ceilings`` bounds each by what the
trace alone allows, ``peers`` holds a rank's gains to when its peers arrive. Imports only
engine.analyze.breakdown of the analysis.
"""
