"""Unit tests; tests/unit/X/test_y.py tests X/y.py."""
