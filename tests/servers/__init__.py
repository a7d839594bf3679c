"""Test servers: processes the harness's own tests drive as ground truth."""
