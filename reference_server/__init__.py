"""The reference server: a streaming LLM server with continuous batching (vLLM's model)."""
