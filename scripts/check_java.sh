#!/usr/bin/env bash
# PySpark 4 needs Java 17 or newer: fail early with the install hint instead of a JVM trace.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "Java 17+ is required by PySpark 4 and was not found." >&2
  echo "Install it, e.g.: sudo apt-get install -y openjdk-17-jre-headless  (or set JAVA_HOME)" >&2
  exit 1
fi
version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2}')
major=${version%%.*}
if [ "${major:-0}" -lt 17 ]; then
  echo "Java 17+ is required by PySpark 4; found Java ${version}." >&2
  echo "Install it, e.g.: sudo apt-get install -y openjdk-17-jre-headless  (or set JAVA_HOME)" >&2
  exit 1
fi
