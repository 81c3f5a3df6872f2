"""Put on PYTHONPATH by the torch launcher (engine.workloads.torch_launch): its sitecustomize.py
finds the steps of an unmodified PyTorch script. Not imported by the engine itself."""
