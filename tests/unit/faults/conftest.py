import pytest

# schedules.py is a helper, not a test module: have pytest explain its failed asserts as it does the tests'.
pytest.register_assert_rewrite("tests.unit.faults.schedules")
