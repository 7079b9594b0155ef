"""Helpers shared by the benchmarks: private databases, Django setup, child processes, verdicts.

Every benchmark works on its OWN PostgreSQL database (``bench_<name>_<pid>``, created here and
dropped at the end, even on failure) and its own SQLite file, VAR_DIR and MEDIA_ROOT under a
temporary directory, so that it never touches a database or a file of anybody else.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# Where the PostgreSQL server is; only its "postgres" maintenance database is used, to create and
# drop this run's own bench_* databases.
ADMIN_URL = (
    os.environ.get("BENCH_PG_URL")
    or os.environ.get("PG_URL")
    or "postgres://postgres@127.0.0.1:5432/postgres"
)


# --- printing and verdicts -------------------------------------------------------------------


def header(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def say(text: str = "") -> None:
    print(text, flush=True)


@dataclass
class Verdict:
    name: str
    value: float
    target: float
    higher_is_better: bool
    unit: str = ""

    @property
    def passed(self) -> bool:
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    def line(self) -> str:
        sign = ">=" if self.higher_is_better else "<="
        if self.value != self.value or self.value in (float("inf"), float("-inf")):
            mark = "PASS" if self.passed else "MISS"
            return f"{mark}  {self.name}: {self.value}{self.unit} (target {sign} {self.target:g}{self.unit})"
        if self.target == 0:
            margin = "" if self.passed else f" (over by {self.value:g}{self.unit})"
        elif self.higher_is_better:
            pct = (self.value / self.target - 1) * 100
            margin = f"{pct:+.0f}% vs target" if self.passed else f"short by {-pct:.0f}%"
        else:
            pct = (self.value / self.target - 1) * 100
            margin = f"{-pct:.0f}% under target" if self.passed else f"over by {pct:.0f}%"
        sign = ">=" if self.higher_is_better else "<="
        mark = "PASS" if self.passed else "MISS"
        target = f"target {sign} {self.target:g}{self.unit}"
        value = f"{self.value:.0f}" if abs(self.value) >= 100 else f"{self.value:.3g}"
        return f"{mark}  {self.name}: {value}{self.unit} ({target}; {margin})"


@dataclass
class Report:
    """What a benchmark prints at its end and (with --json) writes to a file."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def check(
        self, name: str, value: float, target: float, *, higher_is_better: bool, unit: str = ""
    ) -> None:
        self.verdicts.append(Verdict(name, value, target, higher_is_better, unit))

    def print(self) -> None:
        header(f"{self.name}: verdicts")
        for verdict in self.verdicts:
            say(verdict.line())
        for note in self.notes:
            say(f"note: {note}")

    def dump(self, path: str | None) -> None:
        if not path:
            return
        data = {
            "name": self.name,
            "figures": self.figures,
            "verdicts": [{**v.__dict__, "passed": v.passed, "line": v.line()} for v in self.verdicts],
            "notes": self.notes,
            "machine": machine_info(),
        }
        Path(path).write_text(json.dumps(data, indent=2, default=str))


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), nearest-rank on sorted values; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --- the machine -----------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
    }
    with contextlib.suppress(Exception):
        info["mem_total_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    with contextlib.suppress(Exception):
        import psycopg

        with psycopg.connect(ADMIN_URL, connect_timeout=5) as conn:
            info["postgres"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    return info


def print_machine() -> None:
    info = machine_info()
    load = ", ".join(f"{x:.2f}" for x in info["loadavg"])
    say(
        f"machine: {info['nproc']} cores ({info['cpu']}), {info.get('mem_total_gib', '?')} GiB, "
        f"Python {info['python']}, PostgreSQL {info.get('postgres', '?')}, load average {load}"
    )


# --- databases -------------------------------------------------------------------------------


def pg_url(dbname: str) -> str:
    parts = urlsplit(ADMIN_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{dbname}", parts.query, parts.fragment))


def _admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def create_database(name: str) -> str:
    """Create this run's own database and return its URL."""
    if not re.fullmatch(r"bench_[a-z0-9_]+", name):
        raise ValueError(f"refusing to create {name!r}: bench databases are named bench_*")
    _admin_execute(f'DROP DATABASE IF EXISTS "{name}"')
    _admin_execute(f'CREATE DATABASE "{name}"')
    return pg_url(name)


def drop_database(name: str) -> None:
    if not re.fullmatch(r"bench_[a-z0-9_]+", name):
        raise ValueError(f"refusing to drop {name!r}: only bench_* databases are ours")
    with contextlib.suppress(Exception):
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def bench_database(label: str, keep: bool = False) -> Iterator[tuple[str, str]]:
    """``(name, url)`` of a fresh private PostgreSQL database, dropped afterwards."""
    name = f"bench_{label}_{os.getpid()}"
    url = create_database(name)
    try:
        yield name, url
    finally:
        if keep:
            say(f"(kept database {name})")
        else:
            drop_database(name)


@contextlib.contextmanager
def temp_dir(label: str, keep: bool = False) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"bench-{label}-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def base_env(*, settings: str, database_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for this process and its children: private database and files, quiet logs."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "DATABASE_URL": database_url,
        "VAR_DIR": str(var_dir),
        "MEDIA_ROOT": str(var_dir / "media"),
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
        "Q_LOG_LEVEL": "WARNING",
        "PYTHONWARNINGS": "ignore",
        # config.settings refuses to start without a key: the benchmark's own, for its processes.
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    }
    if not database_url:
        env.pop("DATABASE_URL")
    env.update(extra)
    return env


def child_result(command: list[str], env: dict[str, str], timeout: float, what: str) -> dict[str, Any]:
    """Run a benchmark's child process and return the JSON of its last ``RESULT `` line; a child
    that fails or prints none raises with the end of its output."""
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{what} child failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def setup_django(env: dict[str, str]) -> None:
    """Configure this process from ``env`` (settings are read from the environment) and set up."""
    for key in (
        "DJANGO_SETTINGS_MODULE",
        "DATABASE_URL",
        "VAR_DIR",
        "MEDIA_ROOT",
        "DB_POOL",
        "DB_CONN_MAX_AGE",
        "SECRET_KEY",
    ):
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)
    for key, value in env.items():
        if key.startswith(("JOBS_", "Q_", "EMBEDDING", "CHUNK_", "INDEX_", "OCR_", "SSE_", "LOG_")):
            os.environ[key] = value
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import warnings

    warnings.filterwarnings("ignore")
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    Path(os.environ["VAR_DIR"]).mkdir(parents=True, exist_ok=True)
    call_command("migrate", verbosity=0, interactive=False)


# --- child processes -------------------------------------------------------------------------


class Children:
    """Processes this benchmark started (each in its own session), stopped at the end by their
    own process-group id: nothing else on the machine is touched."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(
        self, name: str, args: list[str], env: dict[str, str], **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        log = self.log_dir / f"{name}-{len(self.procs)}.log"
        out = log.open("wb")
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kwargs
        )
        out.close()
        self.procs.append((name, proc, log))
        return proc

    def manage(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        return self.start(name, [PYTHON, str(ROOT / "manage.py"), *command], env)

    def log_text(self, name: str) -> str:
        return "".join(log.read_text(errors="replace") for n, _, log in self.procs if n == name)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {n} ({log})\n{log.read_text(errors='replace')[-chars:]}"
            for n, _, log in self.procs
            if n == name
        )

    def stop(self, proc: subprocess.Popen[bytes], grace: float = 8.0) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        # Whatever is left of its own process group (forked q2 workers) goes now.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)

    def stop_all(self) -> None:
        for _, proc, _ in reversed(self.procs):
            self.stop(proc)


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.1, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what or predicate}")
        time.sleep(interval)


def raise_nofile(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted``; returns the soft limit in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard) if hard != resource.RLIM_INFINITY else max(soft, wanted)
    if target != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


# --- documents -------------------------------------------------------------------------------

_WORDS = (
    "amber",
    "falcon",
    "harbor",
    "cobalt",
    "orchard",
    "velvet",
    "river",
    "granite",
    "lantern",
    "meadow",
    "copper",
    "signal",
    "archive",
    "ledger",
    "invoice",
    "contract",
    "clause",
    "payment",
    "delivery",
    "schedule",
    "warranty",
    "customer",
    "supplier",
    "quarterly",
    "revenue",
    "margin",
    "forecast",
    "inventory",
    "shipment",
    "audit",
    "compliance",
    "policy",
    "network",
    "server",
    "storage",
    "backup",
    "latency",
    "throughput",
    "cluster",
    "replica",
    "failover",
    "incident",
    "report",
    "summary",
)


def page_text(page: int, words: int) -> str:
    """Deterministic prose for one page: paragraphs of sentences from a small vocabulary."""
    out: list[str] = []
    sentence: list[str] = []
    n = page * 7919
    for i in range(words):
        n = (n * 1103515245 + 12345) & 0x7FFFFFFF
        sentence.append(_WORDS[n % len(_WORDS)])
        if len(sentence) >= 8 + n % 9:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
        if i and i % 90 == 0:
            out.append("\n\n")
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return f"Section {page}\n\n" + " ".join(out).replace(" \n\n ", "\n\n")


def text_pdf(pages: int, words_per_page: int = 260) -> bytes:
    """A text PDF of exactly ``pages`` pages (fpdf2, core font)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_font("helvetica", size=10)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 4.6, page_text(number, words_per_page))
    return bytes(pdf.output())


def pdf_pages(path: Path) -> int:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        return len(pdf)
    finally:
        pdf.close()


def common_args(parser: Any) -> None:
    parser.add_argument("--quick", action="store_true", help="A smaller, faster version.")
    parser.add_argument("--json", metavar="FILE", help="Also write the figures and verdicts here.")
    parser.add_argument("--keep", action="store_true", help="Keep the bench database and temp files.")
