# The two commands of the README. Both set up .venv on first use (scripts/bootstrap.sh).
.PHONY: example acs-example ldp-example test lint bootstrap clean

bootstrap:
	@bash scripts/bootstrap.sh

## Run the bundled differentially private release of the Adult table and print where it went.
example: bootstrap
	@.venv/bin/dprelease release examples/adult/release.yaml --out releases

## A release of the ACS 2019 Massachusetts excerpt (schema written from its public data dictionary).
acs-example: bootstrap
	@.venv/bin/dprelease release examples/acs-ma2019/release.yaml --out releases

## Simulate three days of locally randomised reports and decode them (OUE and RAPPOR).
ldp-example: bootstrap
	@.venv/bin/python examples/ldp-covid/simulate.py
	@.venv/bin/dprelease ldp-collect examples/ldp-covid/collection.yaml
	@.venv/bin/dprelease ldp-collect examples/ldp-covid/rappor.yaml

## Run the test suite (unit, statistical privacy, end-to-end flows) on TEST_WORKERS processes, then ruff and mypy.
## Whole test files go to one worker (--dist loadfile): a file's module fixtures (a release, a server) run once.
## The longest files start first (tests/file_seconds.json, ordered in tests/conftest.py; xdist keeps that order).
TEST_WORKERS ?= 2
test: bootstrap
	@.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	@.venv/bin/python -m ruff check dp schemas tasks flows tests quality reports teaching benchmarks setup.py dprelease
	@.venv/bin/python -m mypy

clean:
	rm -rf .venv .dprelease releases
