#!/usr/bin/env bash
# Build the bundle (packaging/build.sh) and run its smoke test: the frozen app must print a line
# starting SMOKE_OK, exit 0, and write to stderr only lines that packaging/stderr-allowlist.txt
# allows. This is the CI job for the packaged app.
#
# Usage: packaging/smoke.sh [--no-build]     (--no-build: test the bundle already in dist/)
# Output of the run is kept in build/smoke/{stdout,stderr}.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "${1:-}" != "--no-build" ]; then
    packaging/build.sh
fi
if [ "$(uname -s)" = Darwin ]; then
    EXECUTABLE="$ROOT/dist/SpecChat.app/Contents/MacOS/SpecChat"
else
    EXECUTABLE="$ROOT/dist/SpecChat/SpecChat"
fi
[ -x "$EXECUTABLE" ] || { echo "error: no bundle at $EXECUTABLE; run packaging/build.sh" >&2; exit 1; }

OUT="$ROOT/build/smoke"
rm -rf "$OUT"
mkdir -p "$OUT/home" "$OUT/cwd"

# The frozen app started as a user starts it (no arguments): its real window must come up, stay
# up and quit cleanly on SIGTERM, offscreen and, where xvfb-run exists, on a real X server. These
# checks mostly wait, so they run beside the smoke test below.
launches=()
for display in offscreen xvfb; do
    flags=()
    if [ "$display" = xvfb ]; then
        command -v xvfb-run >/dev/null || { echo "smoke: no xvfb-run; launch checked offscreen only"; continue; }
        flags=(--xvfb)
    fi
    (cd "$OUT/cwd" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV \
        "${PYTHON:-python3}" "$ROOT/packaging/launch_check.py" ${flags[@]+"${flags[@]}"} \
        --stay "${SPECCHAT_LAUNCH_STAY:-8}" --home "$OUT/launch-$display" -- "$EXECUTABLE" \
        >"$OUT/launch-$display.txt" 2>&1) &
    launches+=("$display:$!")
done

# Run from an empty folder with a clean Python environment, so nothing outside the bundle helps.
status=0
(
    cd "$OUT/cwd"
    env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV QT_QPA_PLATFORM=offscreen \
        SPECCHAT_HOME="$OUT/home" HF_HUB_OFFLINE=1 \
        timeout "${SPECCHAT_SMOKE_LIMIT:-300}" "$EXECUTABLE" --smoke-test
) >"$OUT/stdout.txt" 2>"$OUT/stderr.txt" || status=$?

cat "$OUT/stdout.txt"
fail=0
if [ "$status" -ne 0 ]; then
    echo "smoke: the bundle exited with status $status" >&2
    fail=1
fi
if ! grep -q '^SMOKE_OK ' "$OUT/stdout.txt"; then
    echo "smoke: no line starting SMOKE_OK on stdout" >&2
    fail=1
fi
# Every non-empty stderr line must match (in full) one extended regex of the allow-list.
grep -v -e '^#' -e '^[[:space:]]*$' packaging/stderr-allowlist.txt >"$OUT/allow.txt" || true
grep -v -x -E -f "$OUT/allow.txt" "$OUT/stderr.txt" | grep -v '^[[:space:]]*$' >"$OUT/unexpected.txt" || true
if [ -s "$OUT/unexpected.txt" ]; then
    echo "smoke: stderr lines not in packaging/stderr-allowlist.txt:" >&2
    sed 's/^/    /' "$OUT/unexpected.txt" >&2
    fail=1
fi
if [ "$fail" -ne 0 ]; then
    echo "smoke: FAILED; full stderr in $OUT/stderr.txt:" >&2
    sed 's/^/    /' "$OUT/stderr.txt" >&2
else
    echo "smoke: passed ($(wc -l <"$OUT/stderr.txt" | tr -d ' ') allowed stderr lines)"
fi
for launch in ${launches[@]+"${launches[@]}"}; do
    display="${launch%%:*}"
    if ! wait "${launch#*:}"; then
        echo "smoke: the bundle did not launch and quit as a user's app must ($display)" >&2
        fail=1
    fi
    cat "$OUT/launch-$display.txt"
done
exit "$fail"
