"""What the options that name a log show (`llmchaos logs`, the replay's `--log`): the formats' names
and the longest line, apart from the readers, so that building a parser imports none of them.
`formats` reads by these names (a unit test holds them to each reader's NAME); `lines` to this limit."""

NAMES = ("auto", "llmchaos", "mooncake", "openai-log", "gemini-log", "azure", "burstgpt")  # auto: by the first line
MAX_LINE_BYTES = 8 * 2**20  # a request body of a million-token prompt fits; memory follows this, not the file
