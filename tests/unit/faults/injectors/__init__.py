"""Unit tests of faults/injectors/."""
