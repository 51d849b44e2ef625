#!/usr/bin/env bash
# Install the JDBC drivers the Spark reports use, from Debian's packages (no other download):
#   libpostgresql-jdbc-java     -> /usr/share/java/postgresql.jar
#   libxerial-sqlite-jdbc-java  -> /usr/share/java/sqlite-jdbc.jar (+ libxerial-sqlite-jdbc-jni, its native library)
# Idempotent: does nothing when both jars are present. Needs root (or sudo) to install.
# Prints the jar paths, comma-separated, on success (usable as `spark-submit --jars`).
set -euo pipefail

jars_present() { [[ -f /usr/share/java/postgresql.jar && -f /usr/share/java/sqlite-jdbc.jar ]]; }

if ! jars_present; then
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { echo "setup_jdbc: need root or sudo to apt-get install" >&2; exit 1; }
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait up to 5 minutes for another apt/dpkg (a developer's, unattended-upgrades) to release the lock.
    $SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
    $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends libpostgresql-jdbc-java libxerial-sqlite-jdbc-java >/dev/null
fi
jars_present || { echo "setup_jdbc: the JDBC jars are still missing after install" >&2; exit 1; }
echo "/usr/share/java/postgresql.jar,/usr/share/java/sqlite-jdbc.jar"
