# The two commands of the README: `make demo` and `make test`. Each creates or reuses .venv.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# Parallel workers. Most tests wait on real servers, so 8 workers overlap those waits on 2
# cores (with 4, a fifth of the CPU time sat idle; 8 against 6 saves 15-20 s now that the noise
# tests no longer share the CPU evenly with the rest, below: 412 s and 408 s against 423 s for a
# fresh clone's make test, every test passing). No test's outcome depends on how
# busy that makes the machine, except those marked alone (the verdict sweeps of
# tests/e2e/test_verdicts.py, the backend night's confirmation, a checked set that holds, a
# 15 % set confirmed, a baseline's drift): a verdict on timed launches, which a busy machine
# shrinks. They run beside the others, two at a time, while the others run at idle priority
# (SCHED_IDLE through chrt, else nice 19): the others get a core only when the noise tests
# leave it, so their load does not become the noise tests' noise (at nice 19, a 15 % set once
# measured +8.5 % and a 7 % one +4.8 %); the others only wait longer.
WORKERS ?= 8
IDLE := $(shell command -v chrt >/dev/null 2>&1 && chrt -i 0 true 2>/dev/null && echo chrt -i 0 || echo nice -n 19)
# pytest's temporary folders (every test's study.db, logs, results) in memory where /dev/shm is
# writable with 2 GiB free (a container's default 64 MiB is not enough): a night's SQLite study
# commits each trial attribute on its own, ~15 ms a commit on this disk against well under 1 ms
# in tmpfs. pytest empties the folder when the next run starts.
TEST_TMP ?= $(shell test -w /dev/shm && df -Pk /dev/shm | awk 'NR == 2 && $$4 > 2097152 {found = 1} END {exit !found}' \
	&& echo /dev/shm/nccl-tune-tests || echo $${TMPDIR:-/tmp}/nccl-tune-tests)

.PHONY: demo test lint compile-tests test-fast bench clean

# The tested set: pyproject.toml's ranges held to constraints.txt's pins (a current pip first:
# it installs them in 43 s here, the pip a venv starts with in 59 s).
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test,postgres]"
	touch $(STAMP)

# A fresh simulated sweep of the motivating 8-GPU PCIe box (results/demo/): --fresh replaces the
# previous demo's folder only once the new night has passed every check before its first launch.
demo: $(STAMP)
	$(VENV)/bin/nccl-tune sweep examples/sim.toml --study demo --fresh

# ruff and mypy, as configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check tuner tests benchmarks
	$(VENV)/bin/mypy

# Everything: lint, the tests on $(WORKERS) workers, then the two verdict-calibration sweeps
# on their own; the slow real-vLLM end-to-end test included (it builds a cached vLLM CPU venv).
# The tests marked postgres use a throwaway PostgreSQL on 127.0.0.1 that tests/pgserver.py
# starts before pytest and stops after it, whatever pytest does; its exit status is pytest's.
# With NCCL_TUNE_TEST_PG_URL already set, that server is used instead.
PGRUN := $(PY) tests/pgserver.py run --

# Bytecode compiled once and reused: every test worker imports the whole suite and ~150 CLI and
# server processes import tuner, and a PYTHONDONTWRITEBYTECODE=1 from the environment (common in
# containers) made each compile it again (a worker's collection: 9 s against 3.5 s). Written to
# __pycache__ beside the sources, which .gitignore keeps out of git.
test test-fast compile-tests: export PYTHONDONTWRITEBYTECODE :=

test: $(STAMP)
	mkdir -p $(TEST_TMP)
	@# lint beside the one pass that compiles the suite (and rewrites its asserts) before the
	@# workers each import it: two single-threaded jobs on two cores
	$(MAKE) --no-print-directory -j2 lint compile-tests
	@# the noise tests beside the rest (see WORKERS); their output follows the rest's
	@$(PY) -m pytest -q -rs -n 2 -m alone --basetemp=$(TEST_TMP)/alone > $(TEST_TMP)/alone.out 2>&1 & alone=$$!; \
	$(IDLE) $(PGRUN) $(PY) -m pytest -q -rs -n $(WORKERS) --dist worksteal -m "not alone" --basetemp=$(TEST_TMP)/all; \
	rest=$$?; wait $$alone; noise=$$?; echo "== the noise tests (marked alone), run beside the rest:"; \
	cat $(TEST_TMP)/alone.out; test $$rest -eq 0 && test $$noise -eq 0

compile-tests: $(STAMP)
	$(PY) -m pytest -q --collect-only -p no:cacheprovider > /dev/null

test-fast: $(STAMP)
	mkdir -p $(TEST_TMP)
	$(PGRUN) $(PY) -m pytest -q -n $(WORKERS) --dist worksteal -m "not slow and not alone" --basetemp=$(TEST_TMP)/fast

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) results/*/ .pytest_cache
