# Parley: `make run` sets up and starts everything; `make test` sets up and runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test suite setup lint format browser node bench bench-library clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Parley needs Python 3.11 or newer")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: setup
	$(PY) -m config.launcher

# Browser tests drive Debian's Chromium (plus an emoji font, for role avatars in screenshots);
# the balancer recipe's test runs Debian's nginx. Install what is missing (needs root or sudo).
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -d /usr/share/fonts/truetype/noto ] || [ ! -x /usr/sbin/nginx ]; then \
		echo "Installing Debian's chromium, fonts-noto-color-emoji and nginx for the tests…"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium fonts-noto-color-emoji nginx >/dev/null || \
		{ echo "Could not install them: run 'apt-get install chromium fonts-noto-color-emoji nginx' as root."; exit 1; }; \
	fi

# Style, the import contracts (layers and the direction of calls, no cycles: see
# docs/architecture.md), types, and migrations in step with the models.
# mypy's cache lives outside the checkout, so a fresh clone on the same machine (CI's) starts
# warm: it keys entries by each file's hash, not its path. (Cold, mypy takes minutes here.)
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/parley/mypy

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy --cache-dir "$(MYPY_CACHE)"
	$(PY) manage.py makemigrations --check --dry-run >/dev/null

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Real third-party servers the tests run (the reference MCP server), from npm.
NODE_STAMP := tests/node/node_modules/.installed

node: $(NODE_STAMP)

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	@command -v npm >/dev/null || { echo "The tests need node and npm (the reference MCP server): install nodejs and npm."; exit 1; }
	npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
	@touch $@

# The suite runs side by side in PYTEST_WORKERS processes (pytest-xdist; each with its own
# database, Redis database, ports, workspace folder and browser): twice the cores here,
# since its tests wait on servers, workers and browsers as much as they compute (on this
# 2-core machine: 3 processes 8:17, 4 processes 7:12). An idle process takes tests from a
# busy one's share. PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 4

# The linters (mypy's minutes, on a fresh clone) run beside the suite, not before it (their
# few lines may land between the suite's progress dots); either failing fails `make test`.
test: setup browser node
	@$(MAKE) --no-print-directory -j2 lint suite

suite: setup browser node
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# Benchmarks print ratios measured side by side in one run (see bench/). With
# OPEN_WEBUI=/path/to/open-webui (installed apart, docs/benchmarks.md), the streaming tables
# put Open WebUI beside Parley twice: as its page drives it (title, tags and follow-ups
# asked of the model) and on its core path alone.
bench: setup
	$(PY) -m bench.cache_layout
	$(PY) -m bench.long_threads
	$(PY) -m bench.streaming $(if $(OPEN_WEBUI),--open-webui $(OPEN_WEBUI))
	$(if $(OPEN_WEBUI),$(PY) -m bench.streaming --open-webui $(OPEN_WEBUI) --open-webui-light)
	$(PY) -m bench.chaos
	$(PY) -m bench.library

# The library alone (indexing, retrieval quality, search at 50,000 passages); add
# BENCH_ARGS="--database-url postgres://…" for PostgreSQL.
bench-library: setup
	$(PY) -m bench.library $(BENCH_ARGS)

clean:
	rm -rf $(VENV) tests/node/node_modules var/test-* .pytest_cache .ruff_cache
