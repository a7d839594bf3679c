"""Reference for the throughput benchmark: the same Starlette + uvicorn stack streaming
chunks of the same shape with no engine behind it. Run (repo root): python -m tests.servers.bare PORT"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route


async def chat(request: Request) -> StreamingResponse:
    body = json.loads(await request.body())
    head = 'data: {"id":"chatcmpl-0","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'

    async def gen() -> AsyncIterator[bytes]:
        for i in range(body["max_tokens"]):
            yield (
                f'{head}"delta":{{"content":{json.dumps(" word")}}},"logprobs":null,"finish_reason":null}}]}}\n\n'
            ).encode()
            if i % 64 == 0:
                await asyncio.sleep(0)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/healthz", health)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
