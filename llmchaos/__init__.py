"""llmchaos: chaos and load-testing harness for streaming LLM inference APIs."""

__version__ = "0.1.0"
