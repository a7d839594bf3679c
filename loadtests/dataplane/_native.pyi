"""Types of the native read loop (`_native.c`)."""

E_NONE: int
E_COMPLETE: int
E_CLOSED: int
E_ERROR: int
E_CONNECT_TIMEOUT: int
E_HTTP: int
E_UPGRADE: int
E_SSE: int
E_BODY: int

# take(): status, headers, events (data, valid UTF-8, stamp, late, read number, its read went on past it), body,
# head, end, errno, message, end_at, comments, pending, send_at, expired_at, heard_at (the last read's stamp, else the
# send's; 0: not sent yet), quiet (the longest time from the send or a read to the next read)
News = tuple[
    int,
    list[tuple[str, str]] | None,
    list[tuple[str, bool, float, float, int, bool]],
    bytes,
    bytes,
    int,
    int,
    str,
    float,
    int,
    bool,
    float,
    float | None,
    float,
    float,
]

def wait(epfd: int, timeout_s: float, maxevents: int) -> tuple[list[tuple[int, int]], float]: ...

class Plane:
    def connection(
        self, family: int, host: str, port: int, flowinfo: int = ..., scope_id: int = ...
    ) -> tuple[int, int]: ...
    def start(
        self,
        id: int,
        request: bytes,
        stream: bool,
        connect_s: float,
        deadline: float,
        stall_s: float,
        needles: tuple[bytes, ...],
    ) -> int: ...
    def take(self, id: int, seq: int) -> News: ...
    def arm(self, id: int, seq: int, deadline: float, stall_s: float, content: bool) -> None: ...
    def finish(self, id: int, seq: int, keep: bool) -> None: ...
    def close(self, id: int) -> None: ...
    def drop(self, id: int) -> None: ...
    def opened(self, id: int) -> int: ...
