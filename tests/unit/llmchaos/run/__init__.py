"""Tests of llmchaos/run/."""
