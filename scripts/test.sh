#!/usr/bin/env bash
# The project's test command: every test `cargo test --workspace` runs, with the test binaries
# run several at a time instead of one after another.
#
# Usage (as root, from anywhere in the workspace):
#   scripts/test.sh [JOBS]
# JOBS (default 3, or $TEST_JOBS) test binaries run at once. Each binary runs from its
# package's directory, as under cargo, and its tests run in parallel inside it as usual. The
# cluster tests can run side by side because each uses its own subnets, loopback addresses and
# run ids (docs/testing.md lists them). The longest binaries start first, so the slowest one
# bounds the wall time rather than the sum.
#
# Output: each binary's output in one piece when it ends (failing ones again at the end), then
# a table of every binary's time and result; exit 1 when any binary or the doctests failed.
# The logs stay in $OUT (default target/test-logs).
set -euo pipefail

cd "$(dirname "$0")/.."
workspace="$(pwd)"
jobs="${1:-${TEST_JOBS:-3}}"
case "${jobs}" in
  '' | *[!0-9]* | 0) echo "scripts/test.sh: JOBS must be a positive number, not '${jobs}'" >&2; exit 2 ;;
esac
out="${OUT:-${workspace}/target/test-logs}"
rm -rf "${out}"
mkdir -p "${out}"

# The broker with the deliberate bugs, for the tests that run one (run_replica_divergence):
# built first in the shared target, where its dependencies are, and copied aside, since the
# build without the feature below writes the same path. Cheaper than the tests' fallback, a
# whole build in a target directory of their own.
cargo build -p tidewater-broker --bin tidewater-broker --features deliberate-bugs \
  --message-format=json-render-diagnostics >"${out}/bugs-build.json"
bugs_built="$(grep -o '"executable":"[^"]*tidewater-broker"' "${out}/bugs-build.json" | tail -n 1 | cut -d'"' -f4)"
mkdir -p "${workspace}/target/deliberate-bugs-broker"
cp "${bugs_built}" "${workspace}/target/deliberate-bugs-broker/tidewater-broker"
export TIDEWATER_DELIBERATE_BUGS_BROKER="${workspace}/target/deliberate-bugs-broker/tidewater-broker"

# Build every test binary (and the binaries the tests start) once, and list the executables
# with the package directory each runs from.
cargo test --workspace --no-run --message-format=json-render-diagnostics >"${out}/build.json"
python3 - "${out}/build.json" >"${out}/binaries.tsv" <<'EOF'
import json, os, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(f'{os.path.dirname(m["manifest_path"])}\t{m["executable"]}')
EOF

# The binaries that take a minute or more (docs/testing.md), longest first; the rest follow.
long_first=(shrink_unclean_election run_power_loss run_kafka_client kafka_local kafka_txn java_driver
  run_unclean_election ssh_kafka_run ssh_chaos matrix_systems kafka_unclean_election
  ssh_kafka replication matrix_e2e kafka_differential kafka_clients_real run_replica_divergence
  run_leader_isolation run_e2e run_group nightly_local nemesis_broker kafka_idempotence)
rank() {
  local name i
  name="$(basename "$1")"
  name="${name%-*}"
  for i in "${!long_first[@]}"; do
    if [ "${long_first[$i]}" = "${name}" ]; then echo "${i}"; return; fi
  done
  echo 99
}
while IFS=$'\t' read -r dir exe; do
  printf '%s\t%s\t%s\n' "$(rank "${exe}")" "${dir}" "${exe}"
done <"${out}/binaries.tsv" | sort -n -k1,1 -s | cut -f2- >"${out}/order.tsv"

started=$(date +%s)
run_one() {
  local dir="$1" exe="$2" name log begin status
  name="$(basename "${exe}")"
  log="${out}/${name}.log"
  begin=$(date +%s)
  status=0
  (cd "${dir}" && "${exe}") >"${log}" 2>&1 || status=$?
  printf '%s\t%s\t%s\n' "${name}" "$(( $(date +%s) - begin ))" "${status}" >"${out}/${name}.result"
  {
    echo "     Running ${exe#"${workspace}"/} (${dir#"${workspace}"/})"
    cat "${log}"
  } | flock "${out}/print.lock" cat
}

running=0
while IFS=$'\t' read -r dir exe; do
  if [ "${running}" -ge "${jobs}" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "${dir}" "${exe}" &
  running=$((running + 1))
done <"${out}/order.tsv"
wait || true

echo "   Doc-tests"
doc_status=0
cargo test --workspace --doc >"${out}/doctests.log" 2>&1 || doc_status=$?
cat "${out}/doctests.log"

failed=0
echo
echo "test binaries, ${jobs} at a time, in $(( $(date +%s) - started )) s:"
sort -t$'\t' -k2,2nr "${out}"/*.result | while IFS=$'\t' read -r name seconds status; do
  if [ "${status}" = 0 ]; then result=ok; else result="FAILED (exit ${status})"; fi
  printf '  %-44s %5s s  %s\n' "${name%-*}" "${seconds}" "${result}"
done
for result in "${out}"/*.result; do
  IFS=$'\t' read -r name _ status <"${result}"
  if [ "${status}" != 0 ]; then
    failed=1
    echo
    echo "---- ${name} FAILED; its output again:"
    cat "${out}/${name}.log"
  fi
done
if [ "${doc_status}" != 0 ]; then
  failed=1
  echo "doctests FAILED (exit ${doc_status})"
fi
if [ "${failed}" != 0 ]; then
  echo "scripts/test.sh: FAILED (logs in ${out})"
  exit 1
fi
echo "scripts/test.sh: every test binary and the doctests passed"
