#!/usr/bin/env bash
# Tidewater's nightly run: bring the Vagrant cluster up, build the harness and the broker,
# run the standard durability matrix against the VMs and keep its reports.
#
# Usage: vagrant/nightly.sh            (from anywhere; see vagrant/README.md)
#
# Settings (environment variables):
#   TW_REPO        the workspace (default: the parent of this script's directory)
#   TW_MATRIX      the matrix file (default: harness/matrix/durability.toml)
#   TW_CLUSTER     the cluster file (default: vagrant/cluster.toml)
#   TW_NIGHTLY     where the nightly reports go (default: $TW_REPO/store/nightly)
#   TW_KEEP_DAYS   nightly directories older than this are deleted (default: 30; 0 keeps all)
#   TW_VAGRANT     1 (default): the cluster is this directory's Vagrant VMs; 0: any other ssh
#                  cluster (TW_CLUSTER), no vagrant command is run
#   TW_VAGRANT_UP  1 runs `vagrant up` first (default), 0 expects the VMs to be running
#   TW_HALT_AFTER  1 halts the VMs afterwards (default 0)
#   TW_TIDEWATER   a tidewater binary to use instead of building one with cargo
#
# Each night gets $TW_NIGHTLY/<YYYYMMDDTHHMMSS>/ with the matrix's store (every run's
# report.html, matrix.html, junit.xml) and nightly.log; $TW_NIGHTLY/latest points at it.
# The exit status is the matrix's: 0 when every cell met its expectation.
#
# Example cron line (02:30 every night, as a user in the vagrant and sudo-less setup):
#   30 2 * * * /path/to/tidewater/vagrant/nightly.sh >/dev/null 2>&1
# or the systemd timer: vagrant/tidewater-nightly.service and vagrant/tidewater-nightly.timer.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="${TW_REPO:-$(dirname "${script_dir}")}"
matrix="${TW_MATRIX:-${repo}/harness/matrix/durability.toml}"
cluster="${TW_CLUSTER:-${repo}/vagrant/cluster.toml}"
nightly="${TW_NIGHTLY:-${repo}/store/nightly}"
keep_days="${TW_KEEP_DAYS:-30}"
use_vagrant="${TW_VAGRANT:-1}"
vagrant_up="${TW_VAGRANT_UP:-1}"
halt_after="${TW_HALT_AFTER:-0}"

mkdir -p "${nightly}"
# One nightly at a time: a slow night must not overlap the next one.
exec 9>"${nightly}/.lock"
if ! flock -n 9; then
  echo "nightly: another nightly run holds ${nightly}/.lock; not starting" >&2
  exit 75
fi

stamp="$(date -u +%Y%m%dT%H%M%S)"
night_dir="${nightly}/${stamp}"
mkdir -p "${night_dir}"

# One night: everything it prints also goes to its nightly.log.
night() {
  echo "nightly: ${stamp} repo=${repo} matrix=${matrix} cluster=${cluster}"
  for f in "${matrix}" "${cluster}"; do
    if [ ! -f "${f}" ]; then
      echo "nightly: ${f} is missing" >&2
      return 2
    fi
  done

  cd "${repo}"
  local tidewater
  if [ -n "${TW_TIDEWATER:-}" ]; then
    tidewater="${TW_TIDEWATER}"
  else
    echo "nightly: building tidewater and tidewater-broker (release)"
    cargo build --release --locked -p tidewater -p tidewater-broker
    tidewater="${repo}/target/release/tidewater"
    # The cluster file's install_binary = "auto" copies this binary to every host that differs.
    export TIDEWATER_BROKER_BIN="${repo}/target/release/tidewater-broker"
  fi

  if [ "${use_vagrant}" = "1" ]; then
    if [ "${vagrant_up}" = "1" ]; then
      echo "nightly: vagrant up"
      (cd "${script_dir}" && vagrant up)
    fi
    # Regenerated every night: ports and keys change when VMs are recreated.
    (cd "${script_dir}" && vagrant ssh-config) > "$(dirname "${cluster}")/ssh-config"
  fi

  local status=0
  "${tidewater}" matrix "${matrix}" --cluster "${cluster}" --store "${night_dir}/store" \
    --plain || status=$?
  echo "nightly: matrix finished with exit status ${status}"

  ln -sfn "${stamp}" "${nightly}/latest"

  if [ "${keep_days}" != "0" ]; then
    # Only directories named like a nightly stamp, never anything else in ${nightly}.
    find "${nightly}" -mindepth 1 -maxdepth 1 -type d -name '20[0-9][0-9][01][0-9][0-3][0-9]T*' \
      -mtime "+${keep_days}" -print -exec rm -rf {} +
  fi

  if [ "${use_vagrant}" = "1" ] && [ "${halt_after}" = "1" ]; then
    (cd "${script_dir}" && vagrant halt)
  fi
  return "${status}"
}

night 2>&1 | tee -a "${night_dir}/nightly.log"
exit "${PIPESTATUS[0]}"
