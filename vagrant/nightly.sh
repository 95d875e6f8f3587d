#!/usr/bin/env bash
# Tidewater's nightly run: the standard durability matrix against the Vagrant VMs (or any ssh
# cluster, or a local namespace cluster), every night into one persistent store, so the
# store's index shows each cell's trend across nights and each night's summary says what
# changed since the night before.
#
# Usage: vagrant/nightly.sh            (from anywhere, by hand, cron or systemd; see
#                                       vagrant/README.md)
#
# Works with a minimal environment (cron's PATH=/usr/bin:/bin): every path is absolute, and
# the binaries are found without cargo on PATH.
#
# Settings (environment variables):
#   TW_REPO        the workspace (default: the parent of this script's directory)
#   TW_STORE       the one store every night appends to (default: $TW_REPO/store/nightly)
#   TW_MATRIX      the matrix file (default: $TW_REPO/harness/matrix/durability.toml)
#   TW_CLUSTER     the cluster file (default: $TW_REPO/vagrant/cluster.toml), or `local` for a
#                  local namespace cluster on this machine (needs root; no VMs)
#   TW_TIDEWATER   the tidewater binary (default: `tidewater` on PATH, else
#                  $TW_REPO/target/release/tidewater, else built with cargo)
#   TW_BROKER      the tidewater-broker binary (default: beside TW_TIDEWATER, else on PATH)
#   TW_CARGO       cargo, when a build is needed (default: on PATH, else ~/.cargo/bin/cargo)
#   TW_TIME_LIMIT  seconds per run, overriding the matrix file (default: the file's)
#   TW_SEEDS       comma-separated seeds, one run per cell each (default: the file's
#                  repetitions with random seeds)
#   TW_NOTIFY      a command run at the end with the night's summary.json path as its
#                  argument and NIGHTLY_EXIT in its environment (mail it, post it, ...)
#   TW_KEEP_DAYS   night logs older than this are deleted (default: 30; 0 keeps all)
#   TW_VAGRANT     1 (default with a cluster file): the cluster is this directory's Vagrant
#                  VMs; 0: any other ssh cluster, no vagrant command is run
#   TW_VAGRANT_UP  1 runs `vagrant up` first (default), 0 expects the VMs to be running
#   TW_HALT_AFTER  1 halts the VMs afterwards (default 0)
#
# Each night: $TW_STORE/nights/<YYYYMMDDTHHMMSS>.log holds everything it printed; the matrix
# writes $TW_STORE/<matrix name>/nights/<stamp>/ (matrix.html, junit.xml, summary.json,
# summary.html) and updates $TW_STORE/index.html. Exit status: the matrix's (0 every
# expectation held and nothing regressed, 1 an expectation failed or a cell regressed since
# the previous night, 2 runs errored, 3 the cluster was not ready or a setting was refused:
# nothing ran), 4 a missing file or binary, 75 another night still running.
#
# Example cron line (02:30 every night; the night's own log is in $TW_STORE/nights/, this
# file keeps what happens before it opens):
#   30 2 * * * /path/to/tidewater/vagrant/nightly.sh >>/var/log/tidewater-nightly.log 2>&1
# or the systemd timer: vagrant/tidewater-nightly.service and vagrant/tidewater-nightly.timer.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="${TW_REPO:-$(dirname "${script_dir}")}"
store="${TW_STORE:-${repo}/store/nightly}"
matrix="${TW_MATRIX:-${repo}/harness/matrix/durability.toml}"
cluster="${TW_CLUSTER:-${repo}/vagrant/cluster.toml}"
keep_days="${TW_KEEP_DAYS:-30}"
if [ "${cluster}" = "local" ]; then
  use_vagrant=0
else
  use_vagrant="${TW_VAGRANT:-1}"
fi
vagrant_up="${TW_VAGRANT_UP:-1}"
halt_after="${TW_HALT_AFTER:-0}"
# cron and systemd give a bare PATH; the tools this script itself uses live here.
export PATH="${PATH:-/usr/bin:/bin}:/usr/local/bin:/usr/sbin:/sbin"

mkdir -p "${store}/nights"
store="$(cd "${store}" && pwd)"
# One night at a time: a slow night must not overlap the next one.
exec 9>"${store}/nights/.lock"
if ! flock -n 9; then
  echo "nightly: another night holds ${store}/nights/.lock; not starting" >&2
  exit 75
fi

stamp="$(date -u +%Y%m%dT%H%M%S)"
log="${store}/nights/${stamp}.log"

# The tidewater binary: given, installed, built before, or built now with cargo.
find_tidewater() {
  if [ -n "${TW_TIDEWATER:-}" ]; then
    echo "${TW_TIDEWATER}"
  elif command -v tidewater >/dev/null 2>&1; then
    command -v tidewater
  elif [ -x "${repo}/target/release/tidewater" ] && [ -x "${repo}/target/release/tidewater-broker" ]; then
    echo "${repo}/target/release/tidewater"
  else
    local cargo="${TW_CARGO:-}"
    if [ -z "${cargo}" ]; then
      cargo="$(command -v cargo 2>/dev/null || echo "${HOME:-/root}/.cargo/bin/cargo")"
    fi
    if [ ! -x "${cargo}" ]; then
      echo "nightly: no tidewater binary (TW_TIDEWATER, PATH, ${repo}/target/release) and no cargo to build one (TW_CARGO)" >&2
      return 4
    fi
    echo "nightly: building tidewater and tidewater-broker with ${cargo} (release)" >&2
    (cd "${repo}" && "${cargo}" build --release --locked -p tidewater -p tidewater-broker) >&2
    echo "${repo}/target/release/tidewater"
  fi
}

# One night: everything it prints also goes to its log.
night() {
  echo "nightly: ${stamp} store=${store} matrix=${matrix} cluster=${cluster}"
  if [ ! -f "${matrix}" ]; then
    echo "nightly: the matrix file ${matrix} is missing" >&2
    return 4
  fi
  if [ "${cluster}" != "local" ] && [ ! -f "${cluster}" ]; then
    echo "nightly: the cluster file ${cluster} is missing (or set TW_CLUSTER=local)" >&2
    return 4
  fi
  local tidewater
  tidewater="$(find_tidewater)" || return 4
  local broker="${TW_BROKER:-$(dirname "${tidewater}")/tidewater-broker}"
  if [ ! -x "${broker}" ]; then
    broker="$(command -v tidewater-broker 2>/dev/null || true)"
  fi
  if [ -z "${broker}" ] || [ ! -x "${broker}" ]; then
    echo "nightly: no tidewater-broker beside ${tidewater} or on PATH (set TW_BROKER)" >&2
    return 4
  fi
  # A cluster file's install_binary = "auto" copies this binary to every host that differs.
  export TIDEWATER_BROKER_BIN="${broker}"
  echo "nightly: tidewater=${tidewater} broker=${broker}"

  local target=()
  if [ "${cluster}" = "local" ]; then
    target=(--subnet "${TW_SUBNET:-10.78.0.0/24}")
  else
    target=(--cluster "${cluster}")
    if [ "${use_vagrant}" = "1" ]; then
      if [ "${vagrant_up}" = "1" ]; then
        echo "nightly: vagrant up"
        (cd "${script_dir}" && vagrant up)
      fi
      # Regenerated every night: ports and keys change when VMs are recreated.
      (cd "${script_dir}" && vagrant ssh-config) >"$(dirname "${cluster}")/ssh-config"
    fi
  fi
  local extra=()
  if [ -n "${TW_TIME_LIMIT:-}" ]; then extra+=(--time-limit "${TW_TIME_LIMIT}"); fi
  if [ -n "${TW_SEEDS:-}" ]; then extra+=(--seeds "${TW_SEEDS}"); fi

  local status=0
  "${tidewater}" matrix "${matrix}" "${target[@]}" --store "${store}" --night "${stamp}" \
    "${extra[@]}" --plain || status=$?
  echo "nightly: matrix finished with exit status ${status}"

  local summary
  summary="$(find "${store}" -mindepth 4 -maxdepth 4 -path "*/nights/${stamp}/summary.json" -print -quit)"
  if [ -n "${summary}" ]; then
    echo "nightly: summary ${summary}"
    if [ -n "${TW_NOTIFY:-}" ]; then
      NIGHTLY_EXIT="${status}" ${TW_NOTIFY} "${summary}" || echo "nightly: TW_NOTIFY failed" >&2
    fi
  fi

  if [ "${keep_days}" != "0" ]; then
    # Only night logs, never runs: the store's trends need every run.
    find "${store}/nights" -mindepth 1 -maxdepth 1 -type f -name '20[0-9][0-9][01][0-9][0-3][0-9]T*.log' \
      -mtime "+${keep_days}" -print -delete
  fi

  if [ "${use_vagrant}" = "1" ] && [ "${halt_after}" = "1" ]; then
    (cd "${script_dir}" && vagrant halt)
  fi
  return "${status}"
}

night 2>&1 | tee -a "${log}"
exit "${PIPESTATUS[0]}"
