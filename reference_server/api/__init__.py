"""HTTP APIs of the reference server: OpenAI and Gemini wire formats over one engine."""
