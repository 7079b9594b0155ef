"""Benchmark 3: ``GET /api/documents/{id}/jobs/{job_id}`` under load, against a trivial endpoint.

The web server as deployed (``manage.py serve_web``: granian) with 2 workers and DB_POOL=1 on
this run's own PostgreSQL database, serving
``bench.settings`` (the platform's settings with ``bench.urls``: the real API plus
``/bench/trivial``, a DRF view with no authentication and no query, and ``/bench/trivial-auth``,
the same behind the API's token authentication). The same load generator (``wrk`` with a Lua
script that sets the Authorization header; bench/loadgen.py when wrk is missing) hits each
endpoint in alternating rounds of the same length and concurrency. The ratio is the median of
the rounds' own ratios (status over trivial within one round): this machine's speed drifts by
up to 2x within a minute, which a ratio of medians taken minutes apart would mix in. Queries per
request are counted with CaptureQueriesContext around one test-client request.

Beside it, gunicorn with as many sync workers (``config.wsgi``, persistent connections) serves the
trivial view and the status endpoint in the same rounds: the fastest ordinary Django deployment,
which is the baseline (``gunicorn`` is in the ``dev`` extra; without it those rows
are left out).

Targets (bench/README.md, "Speed where users feel it"): the status endpoint as deployed >= 0.3 x
the trivial view under gunicorn sync workers, p99 <= 100 ms at 32 connections, <= 2 queries per request.

    .venv/bin/python bench/status_endpoint.py [--quick] [--duration S] [--connections N] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TEXT = b"Status benchmark notes.\n\nThe harbor was quiet and the amber falcon crossed the ridge.\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare() -> tuple[str, str]:
    """A user with a token, and one ready document's status URL."""
    from documents.models import Tenant
    from documents.services.accounts import user_create_in_tenant
    from documents.services.upload import document_upload
    from jobs.executor import run_job

    token = user_create_in_tenant(username="bench", tenant_slug="bench")
    tenant = Tenant.objects.get(slug="bench")
    result = document_upload(tenant=tenant, data=TEXT, filename="notes.txt")
    assert result.job is not None
    run_job(result.job.pk, worker="bench")
    return token, f"/api/documents/{result.document.pk}/jobs/{result.job.pk}"


def queries_per_request(path: str, token: str) -> tuple[int, list[str], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    client.get(path, HTTP_HOST="127.0.0.1")  # warm: the first request may load things once per process
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, HTTP_HOST="127.0.0.1")
    return len(captured.captured_queries), [q["sql"] for q in captured.captured_queries], response.status_code


def in_process_ms(path: str, token: str, n: int = 200) -> float:
    """Median milliseconds of one test-client request in this process (no server, no ASGI)."""
    import time

    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    times = []
    for _ in range(n):
        start = time.perf_counter()
        response = client.get(path, HTTP_HOST="127.0.0.1")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
    return common.median(times) * 1000


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        return float("nan")
    return float(match.group(1)) * _UNITS[match.group(2)]


def run_wrk(url: str, token: str, connections: int, duration: float, lua: Path) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(duration)}s", "--latency", "-s", str(lua), url],
        capture_output=True,
        text=True,
        timeout=duration + 60,
    ).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    total = re.search(r"(\d+) requests in", out)
    if not rps:
        raise RuntimeError(f"could not read wrk's output:\n{out}")
    return {
        "requests": int(total.group(1)) if total else 0,
        "requests_per_s": float(rps.group(1)),
        "p50_ms": _ms(p50.group(1)) if p50 else float("nan"),
        "p99_ms": _ms(p99.group(1)) if p99 else float("nan"),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "errors": errors.group(0) if errors else "",
    }


def run_loadgen(url: str, token: str, connections: int, duration: float) -> dict[str, Any]:
    out = subprocess.run(
        [
            common.PYTHON,
            str(Path(__file__).with_name("loadgen.py")),
            url,
            "--connections",
            str(connections),
            "--duration",
            str(duration),
            "--header",
            f"Authorization: Token {token}",
        ],
        capture_output=True,
        text=True,
        timeout=duration + 60,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def server_commands(workers: int, before: str | None = None) -> dict[str, tuple[Any, dict[str, str]]]:
    """The servers compared, each ``(port -> python arguments, extra environment)``.

    ``uvicorn`` (the name kept for the JSON keys of earlier runs) is the deployment's web server
    (``manage.py serve_web``, as run_platform starts it: granian workers, sync views on the WSGI
    handler's thread pool, config/dispatch.py, the edge's deadlines, config/edge.py).
    ``gunicorn`` runs sync workers (``config.wsgi``): the
    baseline's server. Its status requests use the pool like uvicorn's (``DB_POOL=1``): a
    persistent connection with health checks would add a ``SELECT 1`` round trip to every
    request. ``uvicorn-before`` serves the checkout ``before`` (its modules first on the path)
    as that checkout deployed it (uvicorn ``--workers``, Django's ASGI handler for every view).
    """

    def serve_web(port: int) -> list[str]:
        manage = str(common.ROOT / "manage.py")
        return [manage, "serve_web", *("--port", str(port), "--workers", str(workers))]

    def plain_uvicorn(app_dir: str) -> Any:  # the deployment before serve_web
        return lambda port: [
            *("-m", "uvicorn", "config.asgi:application", "--app-dir", app_dir),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)),
            *("--no-access-log", "--log-level", "warning"),
        ]

    servers: dict[str, tuple[Any, dict[str, str]]] = {"uvicorn": (serve_web, {"DB_POOL": "1"})}
    if before:
        servers["uvicorn-before"] = (plain_uvicorn(str(Path(before).resolve())), {"DB_POOL": "1"})
    if importlib.util.find_spec("gunicorn") is not None:
        servers["gunicorn"] = (
            lambda port: [
                *("-m", "gunicorn"),
                "config.wsgi:application",
                *("--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--worker-class", "sync"),
                *("--log-level", "warning"),
            ],
            {"DB_POOL": "1"},
        )
    return servers


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument(
        "--duration", type=float, default=None, help="Seconds per measurement (6, --quick 4)."
    )
    parser.add_argument("--rounds", type=int, default=None, help="Alternating rounds (5, --quick 1).")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loadgen", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="Another checkout of the project (e.g. `git archive <commit>` unpacked): its status "
        "endpoint is served by uvicorn beside this one's, in the same rounds, on the same database.",
    )
    args = parser.parse_args()
    duration = args.duration or (4 if args.quick else 6)
    rounds = args.rounds or (1 if args.quick else 5)
    tool = args.loadgen if args.loadgen != "auto" else ("wrk" if shutil.which("wrk") else "python")

    common.header(
        f"status endpoint: granian (and gunicorn) --workers {args.workers}, DB_POOL=1, PostgreSQL; {tool}, "
        f"{args.connections} connections, {rounds} x {duration:g} s per endpoint"
    )
    common.print_machine()
    report = common.Report("status_endpoint")
    with (
        common.bench_database("status", keep=args.keep) as (_, url),
        common.temp_dir("status", args.keep) as tmp,
    ):
        # The pool, as the web server has it: without it every in-process request would connect.
        env = common.base_env(settings="bench.settings", database_url=url, var_dir=tmp, DB_POOL="1")
        common.setup_django(env)
        common.migrate()
        token, status_path = prepare()

        n_status, sqls, code = queries_per_request(status_path, token)
        assert code == 200, code
        n_trivial, _, _ = queries_per_request("/bench/trivial", token)
        n_auth, _, _ = queries_per_request("/bench/trivial-auth", token)
        say(f"queries per request: status {n_status}, trivial {n_trivial}, trivial-auth {n_auth}")
        for sql in sqls:
            say(f"  - {sql[:220]}")
        in_process = {
            "trivial": in_process_ms("/bench/trivial", token),
            "trivial-auth": in_process_ms("/bench/trivial-auth", token),
            "status": in_process_ms(status_path, token),
        }
        say(
            "in-process test-client time per request (median, no server): "
            + ", ".join(f"{k} {v:.2f} ms" for k, v in in_process.items())
        )

        children = common.Children(tmp)
        lua = tmp / "auth.lua"
        lua.write_text(f'wrk.headers["Authorization"] = "Token {token}"\n')
        # Children see this run's PYTHONPATH after the project (packages installed beside the
        # shared environment, e.g. httptools and uvloop to measure before adding them).
        child_path = os.pathsep.join(p for p in (env["PYTHONPATH"], os.environ.get("PYTHONPATH", "")) if p)
        servers = server_commands(args.workers, args.before)
        ports = {name: free_port() for name in servers}
        bases = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        endpoints = {
            "trivial": bases["uvicorn"] + "/bench/trivial",
            "trivial-auth": bases["uvicorn"] + "/bench/trivial-auth",
            "status": bases["uvicorn"] + status_path,
        }
        if "gunicorn" in servers:
            endpoints["gunicorn-trivial"] = bases["gunicorn"] + "/bench/trivial"
            endpoints["gunicorn-status"] = bases["gunicorn"] + status_path
        if "uvicorn-before" in servers:
            endpoints["before-status"] = bases["uvicorn-before"] + status_path
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in endpoints}
        try:
            for name, (command, extra_env) in servers.items():
                children.start(
                    name,
                    [common.PYTHON, *command(ports[name])],
                    {**env, "PYTHONPATH": child_path, **extra_env},
                )
            import httpx

            def up(server: str) -> bool:
                try:
                    return httpx.get(f"{server}/bench/trivial", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            for server in bases.values():
                common.wait_for(lambda server=server: up(server), timeout=60, interval=0.2, what=server)
                check = httpx.get(
                    server + status_path, headers={"Authorization": f"Token {token}"}, timeout=10
                )
                assert check.status_code == 200, check.text[:300]

            def measure(url: str, seconds: float) -> dict[str, Any]:
                if tool == "wrk":
                    return run_wrk(url, token, args.connections, seconds, lua)
                return run_loadgen(url, token, args.connections, seconds)

            for url in endpoints.values():  # warm-up: every worker process and pool gets going
                measure(url, 2)
            for r in range(rounds):
                for name, url in endpoints.items():
                    res = measure(url, duration)
                    results[name].append(res)
                    say(
                        f"  round {r + 1} {name:<16} {res['requests_per_s']:8.1f} req/s  "
                        f"p50 {res['p50_ms']:7.1f} ms"
                        f"  p99 {res['p99_ms']:7.1f} ms  non-2xx {res['non_2xx']}"
                        + (f"  {res['errors']}" if res.get("errors") else "")
                    )
        finally:
            children.stop_all()

    summary = {}
    for name, runs in results.items():
        summary[name] = {
            "requests_per_s": common.median([r["requests_per_s"] for r in runs]),
            "p50_ms": common.median([r["p50_ms"] for r in runs]),
            "p99_ms": common.median([r["p99_ms"] for r in runs]),
            "non_2xx": sum(r["non_2xx"] for r in runs),
        }
    say("")
    for name, s in summary.items():
        say(
            f"{name:<16} median {s['requests_per_s']:8.1f} req/s  p50 {s['p50_ms']:6.1f} ms  "
            f"p99 {s['p99_ms']:6.1f} ms"
            f"  non-2xx {s['non_2xx']}"
        )

    def round_ratios(baseline: str, mine_name: str = "status") -> list[float]:
        return [
            mine["requests_per_s"] / theirs["requests_per_s"]
            for mine, theirs in zip(results[mine_name], results[baseline], strict=True)
        ]

    per_round = round_ratios("trivial")
    per_round_auth = round_ratios("trivial-auth")
    say("status / trivial per round: " + ", ".join(f"{x:.2f}" for x in per_round))
    say("status / trivial-auth per round: " + ", ".join(f"{x:.2f}" for x in per_round_auth))
    ratio = common.median(per_round)
    report.figures.update(
        {
            "summary": summary,
            "rounds": results,
            "queries": {"status": n_status, "trivial": n_trivial, "trivial_auth": n_auth, "status_sql": sqls},
            "in_process_ms": in_process,
        }
    )
    if "gunicorn-trivial" in results:
        shipped = round_ratios("gunicorn-trivial")
        wsgi = round_ratios("gunicorn-trivial", "gunicorn-status")
        say("status (serve_web) / gunicorn trivial per round: " + ", ".join(f"{x:.2f}" for x in shipped))
        say("status (gunicorn) / gunicorn trivial per round: " + ", ".join(f"{x:.2f}" for x in wsgi))
        report.check(
            "status as deployed (serve_web) / trivial under gunicorn sync workers (median of round ratios)",
            common.median(shipped),
            0.3,
            higher_is_better=True,
            unit="x",
        )
        report.notes.append(
            f"status under gunicorn sync workers / trivial under gunicorn: {common.median(wsgi):.2f}x, "
            f"p99 {summary['gunicorn-status']['p99_ms']:.0f} ms; trivial: gunicorn "
            f"{summary['gunicorn-trivial']['requests_per_s']:.0f} vs serve_web "
            f"{summary['trivial']['requests_per_s']:.0f} req/s"
        )
        if "before-status" in results:
            before_ratio = round_ratios("gunicorn-trivial", "before-status")
            gain = round_ratios("before-status", "status")
            say(
                "status before (uvicorn) / gunicorn trivial per round: "
                + ", ".join(f"{x:.2f}" for x in before_ratio)
            )
            say("status now / status before per round: " + ", ".join(f"{x:.2f}" for x in gain))
            report.notes.append(
                f"the checkout before, same rounds: status / trivial under gunicorn "
                f"{common.median(before_ratio):.2f}x, p99 {summary['before-status']['p99_ms']:.0f} ms; "
                f"this checkout serves {common.median(gain):.2f}x its requests per second"
            )
    report.check(
        "status p99 at the load (as deployed)",
        summary["status"]["p99_ms"],
        100,
        higher_is_better=False,
        unit=" ms",
    )
    label = "status req/s / trivial req/s, same server (median of the rounds' ratios)"
    report.check(label, ratio, 0.7, higher_is_better=True, unit="x")
    report.check("queries per status request", n_status, 2, higher_is_better=False)
    if any(s["non_2xx"] for s in summary.values()):
        report.notes.append("some responses were not 2xx: the figures are not valid")
    report.notes.append(
        f"status vs trivial-auth (same authentication), median of the rounds' ratios: "
        f"{common.median(per_round_auth):.2f}x"
    )
    report.notes.append(
        "in process (no server): status takes "
        f"{in_process['status'] / in_process['trivial']:.1f}x the trivial endpoint's time, "
        f"{in_process['status'] / in_process['trivial-auth']:.2f}x trivial-auth's"
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
