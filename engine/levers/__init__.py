"""The lever library (DESIGN §6): specs in manifests/levers.json; the registry in library.py, one
module per lever family (launch, kernels, data, power) on base.py's helpers and priors.py's
named effect-model priors."""
