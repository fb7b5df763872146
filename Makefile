# encmatch build: the Go core as a C shared library, the Python package in a
# project-local virtual environment, the demo and the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIB    := python/encmatch/_lib/libencmatch.so
GO_SRC := $(shell find core -name '*.go' -not -name '*_test.go') core/go.mod core/go.sum

.PHONY: all core venv demo test test-go test-py clean

all: core venv

core: $(LIB)

$(LIB): $(GO_SRC)
	mkdir -p $(dir $@)
	cd core && go build -buildmode=c-shared -o ../$@ ./capi

$(VENV)/.installed: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e 'python[test]'
	touch $@

venv: $(VENV)/.installed

## demo: build everything, then run the end-to-end demo at the secure parameters
demo: all
	$(VENV)/bin/encmatch demo

## test: Go unit tests (with fuzz seeds) and the Python suite
test: test-go test-py

test-go:
	cd core && go vet ./... && go test -count=1 -timeout 20m ./...

test-py: all
	$(PY) -m pytest -q python/tests

clean:
	rm -rf $(dir $(LIB)) $(VENV)
