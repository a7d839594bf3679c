"""Unit tests of loadtests/."""
