"""Unit tests of the test servers in tests/servers/."""
