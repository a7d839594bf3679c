"""Unit tests of reference_server/executors/."""
