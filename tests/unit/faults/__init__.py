"""Unit tests of faults/."""
