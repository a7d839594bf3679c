"""A request-body limit in front of every route: past it the request is a 413, read no further.

Pure ASGI: the app reads the body through a `receive` that counts it. A declared content-length
over the limit is refused at the first read, a chunked body as soon as the limit is crossed; the
handler's own error handling renders the APIError in its API's shape.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.api.common import APIError


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def too_large(self) -> APIError:
        return APIError("INVALID_ARGUMENT", f"request body is over the limit of {self.max_bytes} bytes", status=413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
        refuse_now = declared.isdigit() and int(declared) > self.max_bytes
        received = 0

        async def limited() -> Message:
            nonlocal received
            if refuse_now:
                raise self.too_large()
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self.too_large()
            return message

        await self.app(scope, limited, send)
