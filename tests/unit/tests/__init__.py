"""Unit tests of the test-support code in tests/ (tests/unit/tests/test_y.py tests tests/y.py)."""
