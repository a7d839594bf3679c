"""The kernel-stamped test server: each request stamped by its first byte's arrival, keep-alive,
a valid OpenAI stream for any chat completion."""

import time

import httpx

from llmchaos.sse_codec import Decoder
from tests.servers import stamped


def test_requests_are_stamped_when_they_arrive_and_answered_with_a_stream():
    with stamped.running() as server, httpx.Client(base_url=server.url) as c:
        stamps = []
        for i in range(3):  # one connection, kept alive
            before = time.time()
            r = c.post("/v1/chat/completions", json={"messages": []}, headers={"x-request-id": f"r{i}"})
            stamps.append((before, time.time()))
            assert r.headers["content-type"] == "text/event-stream"
            events = [e.data for e in Decoder().feed(r.content)]
            assert events[-1] == "[DONE]"
            assert '"content":"Hello,"' in events[0]
        truth = c.get("/truth").json()
    assert list(truth) == ["r0", "r1", "r2"]
    for i, (before, after) in enumerate(stamps):
        assert before <= truth[f"r{i}"] <= after
