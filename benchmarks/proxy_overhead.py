"""Per-event latency the SSE chaos proxy adds with no fault active.

The same aiohttp client reads the timestamping SSE source directly and through the proxy, in
the same run (source and proxy on CPU 0, client on CPU 1); the difference of the lag
percentiles is the proxy's. Target: under 0.2 ms at p99.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import process  # noqa: E402
from client_throughput import SOURCE, aiohttp_client, run_pinned  # noqa: E402

STREAMS = 50  # an event every 20 ms each: 2,500 events/s


def main() -> int:
    with process(SOURCE, cpu=0, health="/healthz") as (source, _):
        direct = run_pinned(aiohttp_client, source, STREAMS)
        proxy_cmd = [sys.executable, "-m", "llmchaos.cli", "proxy", "--listen", "127.0.0.1:{port}",
                     "--upstream", source]
        with process(proxy_cmd, cpu=0, health="/healthz") as (proxied_url, _):
            proxied = run_pinned(aiohttp_client, proxied_url, STREAMS)
    print(f"{STREAMS} streams, an event every 20 ms each")
    print(f"{'path':10} {'events/s':>9} {'lag p50 ms':>11} {'lag p99 ms':>11}")
    for name, r in (("direct", direct), ("proxied", proxied)):
        print(f"{name:10} {r['events_s']:9.0f} {r['lag_p50'] * 1000:11.3f} {r['lag_p99'] * 1000:11.3f}")
    added = proxied["lag_p99"] - direct["lag_p99"]
    print(f"added by the proxy: p50 {(proxied['lag_p50'] - direct['lag_p50']) * 1000:.3f} ms, "
          f"p99 {added * 1000:.3f} ms; target < 0.2 ms at p99: {'met' if added < 0.0002 else 'NOT met'}")
    return 0 if added < 0.0002 else 1


if __name__ == "__main__":
    sys.exit(main())
