#!/usr/bin/env bash
# Provisions one Tidewater node: iptables, the broker binary from the synced workspace, a
# systemd unit. Usage: provision.sh NODE_NAME ADDRESS ROLE [KAFKA_TARBALL [JRE_PACKAGE]]
# (ROLE is controller or broker). With KAFKA_TARBALL (a Kafka release already copied into
# the VM; the Vagrantfile does it for TW_KAFKA_TARBALL), the node gets Apache Kafka in
# /opt/kafka and a Java runtime instead of the companion broker (docs/real-kafka.md).
set -euo pipefail

node_name="${1:?node name}"
address="${2:?address}"
role="${3:?role: controller or broker}"
kafka_tarball="${4:-}"
jre_package="${5:-openjdk-17-jre-headless}"
kafka_home="/opt/kafka"
workspace="/tidewater"
binary_src="${workspace}/target/release/tidewater-broker"
binary_dst="/usr/local/bin/tidewater-broker"
lossyfs_src="${workspace}/target/release/tidewater-lossyfs"
lossyfs_dst="/usr/local/bin/tidewater-lossyfs"
data_dir="/var/lib/tidewater"
config_dir="/etc/tidewater"

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq iptables procps curl >/dev/null

# Apache Kafka instead of the companion broker: the harness starts it itself over ssh
# (vagrant/cluster-kafka.toml), so no unit is installed, and the companion broker's unit is
# disabled in case an earlier provisioning installed it.
if [ -n "${kafka_tarball}" ]; then
  if [ ! -f "${kafka_tarball}" ]; then
    echo "provision: ${kafka_tarball} is missing (set TW_KAFKA_TARBALL to a Kafka release tarball on the host)" >&2
    exit 1
  fi
  apt-get install -y -qq "${jre_package}" util-linux >/dev/null
  rm -rf "${kafka_home}.new"
  install -d -m 0755 "${kafka_home}.new"
  tar -xzf "${kafka_tarball}" -C "${kafka_home}.new" --strip-components=1
  if [ ! -x "${kafka_home}.new/bin/kafka-server-start.sh" ] || [ ! -x "${kafka_home}.new/bin/kafka-storage.sh" ]; then
    echo "provision: ${kafka_tarball} is not a Kafka release with KRaft (no bin/kafka-storage.sh; Kafka 3.3 or later is needed)" >&2
    exit 1
  fi
  rm -rf "${kafka_home}"
  mv "${kafka_home}.new" "${kafka_home}"
  rm -f "${kafka_tarball}"
  install -d -m 0755 "${data_dir}"
  if systemctl cat tidewater-broker.service >/dev/null 2>&1; then
    systemctl disable --now tidewater-broker.service >/dev/null 2>&1 || true
  fi
  release="an unknown Kafka"
  for jar in "${kafka_home}"/libs/kafka_*.jar; do
    [ -f "${jar}" ] && release="$(basename "${jar}" .jar)"
    break
  done
  echo "provision: ${node_name} (${role}) at ${address} ready with ${release} in ${kafka_home}"
  exit 0
fi

# The harness also copies its own broker binary before each run when the cluster file says
# install_binary = "auto" (vagrant/cluster.toml does), so a missing one here is only a warning.
if [ -x "${binary_src}" ]; then
  install -m 0755 "${binary_src}" "${binary_dst}"
else
  echo "provision: ${binary_src} is missing (build it with 'cargo build --release -p tidewater-broker'); the harness will install the broker binary before the first run" >&2
fi

# Power loss (the nightly's power-loss-leader cells) mounts lossyfs over the data directory:
# it needs /dev/fuse and the binary (a run with install_binary copies a newer one itself).
modprobe fuse 2>/dev/null || true
if [ -x "${lossyfs_src}" ]; then
  install -m 0755 "${lossyfs_src}" "${lossyfs_dst}"
else
  echo "provision: ${lossyfs_src} is missing (build it with 'cargo build --release -p tidewater-lossyfs'); runs that cut power need it here, or install_binary in the cluster file with it built on the host" >&2
fi

install -d -m 0755 "${data_dir}" "${config_dir}"
# The harness rewrites this file before each run (it knows the controller address and the
# run's settings); this default lets the unit start on its own for a smoke test.
if [ ! -f "${config_dir}/broker.toml" ]; then
  broker_id="${node_name#n}"
  [ "${role}" = "controller" ] && broker_id=0
  cat > "${config_dir}/broker.toml" <<TOML
"broker.id" = "${broker_id}"
"listeners" = "http://${address}:9092"
"log.dirs" = "${data_dir}/data"
TOML
fi
echo "TIDEWATER_ROLE=${role}" > "${config_dir}/role.env"

install -m 0644 "${workspace}/vagrant/tidewater-broker.service" /etc/systemd/system/tidewater-broker.service
systemctl daemon-reload
systemctl enable tidewater-broker.service >/dev/null
echo "provision: ${node_name} (${role}) at ${address} ready"
