#!/bin/sh
# Runs every fuzz target of the Go core for N executions each (default
# 1,000,000) and prints one line per target: package, target, executions,
# seconds, result. See docs/FUZZ.md.
#
#   core/fuzz.sh                      # every target, 10^6 executions, one at a time
#   core/fuzz.sh 100000               # every target, 10^5 executions
#   core/fuzz.sh 1000000 ./base/codec/     # the targets of one package
#   core/fuzz.sh -list                # list the targets
#   FUZZ_JOBS=12 core/fuzz.sh         # 12 targets at once (one core each)
#   FUZZ_PARALLEL=2 core/fuzz.sh      # fuzzing workers per target (default 1)
#
# Targets are found by name (func FuzzX in *_test.go), so new ones are
# picked up. A failing input is saved by Go under
# <package>/testdata/fuzz/<target>/ and from then on runs as a regression
# case in every `go test`. Logs go to $FUZZ_LOGDIR (default: a temporary
# directory, printed at the end).
set -u
cd "$(dirname "$0")" || exit 1

if [ "${1:-}" = "--one" ]; then
	# Internal: run one target ($2 package, $3 target, $4 executions).
	pkg=$2 target=$3 n=$4
	log="$FUZZ_LOGDIR/$(echo "$pkg" | tr -d './')-$target.log"
	start=$(date +%s)
	go test -run '^$' -fuzz "^$target\$" -fuzztime "${n}x" -parallel "${FUZZ_PARALLEL:-1}" "$pkg" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	if [ $rc -eq 0 ]; then result=ok; else result="FAIL (see $log)"; fi
	printf '%-14s %-32s %10s execs %6ss  %s\n' "$pkg" "$target" "${execs:-?}" "$secs" "$result"
	exit $rc
fi

targets() {
	for file in $(grep -l '^func Fuzz' $(find . -path ./build -prune -o -name '*_test.go' -print | sort)); do
		pkg=./$(dirname "$file" | sed 's|^\./||')/
		for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
			echo "$pkg $target"
		done
	done
}

if [ "${1:-}" = "-list" ]; then
	targets
	exit 0
fi
n=${1:-1000000}
only=${2:-}
FUZZ_LOGDIR=${FUZZ_LOGDIR:-$(mktemp -d)}
export FUZZ_LOGDIR FUZZ_PARALLEL
FUZZ_PARALLEL=${FUZZ_PARALLEL:-1}
# Build each package's instrumented test binary once, before any target
# runs (concurrent first builds would race for the same cache entries).
for pkg in $(targets | cut -d' ' -f1 | sort -u); do
	if [ -z "$only" ] || [ "$pkg" = "$only" ]; then
		go test -run '^$' -fuzz '^$' "$pkg" >/dev/null 2>&1 || true
	fi
done
targets | while read -r pkg target; do
	if [ -z "$only" ] || [ "$pkg" = "$only" ]; then
		echo "$pkg $target $n"
	fi
done | xargs -P "${FUZZ_JOBS:-1}" -L 1 "./$(basename "$0")" --one
status=$?
echo "logs: $FUZZ_LOGDIR"
exit $status
