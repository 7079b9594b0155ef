"""A small HTTP/1.1 keep-alive load generator (asyncio streams), used when ``wrk`` is missing.

Run as its own process so that it does not share an interpreter with the server or the bench:

    .venv/bin/python bench/loadgen.py URL --connections 32 --duration 10 --header "Authorization: Token X"

Prints one JSON line: requests, seconds, requests_per_s, non_2xx, errors, p50_ms, p99_ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


async def one_connection(
    host: str, port: int, request: bytes, deadline: float, latencies: list[float], counts: dict[str, int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.monotonic() < deadline:
            start = time.monotonic()
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                counts["errors"] += 1
                return
            status = int(status_line.split()[1])
            length = 0
            chunked = False
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
                elif name.lower() == "transfer-encoding" and "chunked" in value.lower():
                    chunked = True
            if chunked:
                while True:
                    size = int((await reader.readline()).strip() or b"0", 16)
                    await reader.readexactly(size + 2)
                    if size == 0:
                        break
            elif length:
                await reader.readexactly(length)
            latencies.append(time.monotonic() - start)
            counts["requests"] += 1
            if not 200 <= status < 400:
                counts["non_2xx"] += 1
    except (OSError, asyncio.IncompleteReadError, ValueError):
        counts["errors"] += 1
    finally:
        writer.close()


async def run(url: str, connections: int, duration: float, headers: list[str]) -> dict[str, float]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    extra = "".join(f"{h}\r\n" for h in headers)
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}\r\n".encode()
    latencies: list[float] = []
    counts = {"requests": 0, "non_2xx": 0, "errors": 0}
    start = time.monotonic()
    deadline = start + duration
    await asyncio.gather(
        *(one_connection(host, port, request, deadline, latencies, counts) for _ in range(connections))
    )
    elapsed = time.monotonic() - start
    latencies.sort()

    def pct(p: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000
            if latencies
            else float("nan")
        )

    return {
        **counts,
        "seconds": elapsed,
        "requests_per_s": counts["requests"] / elapsed,
        "p50_ms": pct(50),
        "p99_ms": pct(99),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.url, args.connections, args.duration, args.header))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
