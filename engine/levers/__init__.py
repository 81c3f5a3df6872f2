"""The lever library (DESIGN §6): specs in manifests/levers.json, code in library.py."""
