"""Unit tests of llmchaos/."""
