#!/usr/bin/env bash
# Hunts flaky tests: runs test binaries of the debug build many times in a row, directly (not
# through cargo, so nothing is rebuilt between runs and the harness uses the tidewater-broker
# next to it), and reports each binary's passes as "N of M". Failing runs keep their output.
#
# Usage (as root, from the workspace, after `cargo test --workspace --no-run`):
#   scripts/repeat-tests.sh [ROUNDS] [BINARY ...]
# ROUNDS defaults to 10; the binaries default to every cluster and end-to-end test.
# Output: one line per run in $OUT/runs.log (default OUT=/tmp/tidewater-repeat), the output
# of failing runs in $OUT/<binary>-<round>.log, and the summary on standard output.
set -euo pipefail

cd "$(dirname "$0")/.."
workspace="$(pwd)"
rounds="${1:-10}"
shift || true
out="${OUT:-/tmp/tidewater-repeat}"
mkdir -p "${out}"
if [ "$#" -gt 0 ]; then
  binaries=("$@")
else
  binaries=(cluster_broker cluster_local cluster_sigint_run cluster_ssh matrix_e2e nemesis_broker
    nightly_local run_e2e run_group run_leader_isolation run_power_loss run_unclean_election
    run_vacuous ssh_chaos ssh_unreachable replication groups_cluster crash connections)
fi

# The newest test executable of a binary (target/debug/deps/<name>-<hash>).
executable() {
  find "${workspace}/target/debug/deps" -maxdepth 1 -type f -executable -name "$1-*" \
    -printf '%T@ %p\n' | sort -rn | head -n 1 | cut -d' ' -f2-
}

# The package a test binary belongs to: it runs from that package's directory, as under cargo.
package_dir() {
  if [ -f "${workspace}/broker/tests/$1.rs" ]; then echo "${workspace}/broker"; else echo "${workspace}/harness"; fi
}

declare -A passed
for b in "${binaries[@]}"; do passed[$b]=0; done
for round in $(seq 1 "${rounds}"); do
  for b in "${binaries[@]}"; do
    exe="$(executable "${b}")"
    if [ -z "${exe}" ]; then
      echo "no test executable for ${b}: run cargo test --workspace --no-run first" >&2
      exit 2
    fi
    start=$(date +%s)
    status=0
    (cd "$(package_dir "${b}")" && "${exe}") >"${out}/${b}-${round}.log" 2>&1 || status=$?
    echo "round ${round} ${b} exit=${status} seconds=$(($(date +%s) - start))" >>"${out}/runs.log"
    if [ "${status}" -eq 0 ]; then
      passed[$b]=$((passed[$b] + 1))
      rm -f "${out}/${b}-${round}.log"
    fi
  done
done
for b in "${binaries[@]}"; do
  echo "${b}: ${passed[$b]} of ${rounds} passed"
done
