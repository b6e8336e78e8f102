# Ollie Tray — the two commands of the README's Quick start, plus helpers.
#   make run      install the commands into ~/.local/bin (once), start the tray
#                 (bundled demo tools when you have none)
#   make test     lint, type-check and run the whole test suite
#   make install  only the first part of `make run`

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
USER_TOOLS := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/ollie/tools

.PHONY: run install test lint typecheck pytest bench screenshots clean mutate mutate-report

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11 or newer is needed (found: $$($(PYTHON) --version))"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || \
	  { echo "Could not create a virtual environment. On Debian/Ubuntu: sudo apt install python3-venv"; exit 1; }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)
	@scripts/install-user-commands $(BIN)

run: install
	@if [ -z "$$OLLIE_TOOLS_PATH" ] && [ -z "$$(ls -A '$(USER_TOOLS)' 2>/dev/null)" ]; then \
	  echo "No tools in $(USER_TOOLS): starting with the bundled demo tools."; \
	  exec $(BIN)/ollie-tray --demo; \
	else \
	  exec $(BIN)/ollie-tray; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict registry_core ollie_tray

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	@for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing of the broker, sandbox/, dispatch/ and the approval dialog (slow:
# hours on two cores; not part of `make test`).  MUTANTS='glob' restricts the run,
# e.g. MUTANTS='registry_core.broker.decide.grants*'.  `make mutate-report`: the table.
mutate: $(STAMP)
	$(BIN)/pip install --quiet 'mutmut>=3.8.1'
	QT_QPA_PLATFORM=offscreen $(BIN)/mutmut run --max-children $(or $(MUTATE_JOBS),2) $(MUTANTS)
	$(BIN)/mutmut export-cicd-stats
	@$(BIN)/python -c 'import json; s = json.load(open("mutants/mutmut-cicd-stats.json")); \
	  done = s["killed"] + s["survived"] + s["timeout"]; \
	  print("mutants:", s); print("kill rate (killed + timeout) / tested: %.1f%%" % \
	  (100 * (s["killed"] + s["timeout"]) / max(done, 1)))'
	$(BIN)/python scripts/mutate_report.py

mutate-report: $(STAMP)
	$(BIN)/pip install --quiet 'mutmut>=3.8.1'
	$(BIN)/python scripts/mutate_report.py $(MODULES)

clean:
	rm -rf mutants $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
