# Shared by the dev/ and bench/ scripts: source it after `set -euo pipefail`.
#   root=$(cd "$(dirname "$0")/.." && pwd); . "$root/dev/lib.sh"
# It defines functions only; nothing runs on sourcing.

# The project's Python environment (.venv), created or brought up to date with pyproject.toml.
ensure_python_env() {
  "$root/dev/python-env"
}

# The pinned pyspark's Spark distribution: bin/, sbin/ and jars/ of Spark 4.3.0.
spark_home() {
  ensure_python_env
  "$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'
}

# Spark's jars, which the JVM build compiles against; SPARK_JARS_DIR when dev/sbt has set it.
spark_jars_dir() {
  if [ -n "${SPARK_JARS_DIR:-}" ]; then echo "$SPARK_JARS_DIR"; else echo "$(spark_home)/jars"; fi
}

# The newest file matching a glob, or nothing.
newest() {
  ls -t $1 2>/dev/null | head -n 1 || true
}

# True when `jar` is missing or older than any file under the given sources.
is_stale() {
  local jar=$1; shift
  [ -z "$jar" ] || [ ! -f "$jar" ] ||
    [ -n "$(find "$@" -path "$root/project/target" -prune -o -path "$root/project/project" -prune \
      -o -type f -newer "$jar" -print 2>/dev/null | head -n 1)" ]
}

# Fetches one Maven artifact (group:artifact:version[:type:classifier]) through the machine's
# Maven into .tools/m2, and prints the path of the file.
maven_fetch() {
  local coordinates=$1 file=$2
  mvn -B -q -Dmaven.repo.local="$root/.tools/m2" dependency:get \
    -Dartifact="$coordinates" -Dtransitive=false >&2
  echo "$root/.tools/m2/$file"
}
