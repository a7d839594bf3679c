"""The torch executor (`llmchaos serve --engine torch`): a transformers model over a paged KV cache."""
