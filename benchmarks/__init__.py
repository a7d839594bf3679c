"""Performance benchmarks of the core and its components; run each as `python -m benchmarks.NAME` from the repo root."""
