#!/usr/bin/env bash
# A shared MLflow tracking server for dlbench: PostgreSQL (Debian's package) as the backend store, artifacts
# proxied by the server (clients need no shared disk), bound to loopback, optional basic auth.
#
#   scripts/setup/server.sh start    (make server)       start PostgreSQL and `mlflow server`; print the URI to use
#   scripts/setup/server.sh stop     (make server-stop)  stop both; no process is left
#   scripts/setup/server.sh status
#
# Settings (environment):
#   DLBENCH_SERVER_DIR      state: pg/ (data), artifacts/, logs, pid and secret files   (default <repo>/.server)
#   DLBENCH_SERVER_HOST     the server's address (default 127.0.0.1; another address exposes it: use auth)
#   DLBENCH_SERVER_PORT     the server's port (default 5050)
#   DLBENCH_SERVER_WORKERS  the server's worker processes (default 2)
#   DLBENCH_PG_PORT         PostgreSQL's port, on 127.0.0.1 only (default 5433, beside a system one on 5432)
#   DLBENCH_SERVER_AUTH=1   basic auth (`--app-name basic-auth`): the admin is $DLBENCH_SERVER_USER (admin), the
#                           password $DLBENCH_SERVER_PASSWORD, else the file $DLBENCH_SERVER_PASSWORD_FILE, else
#                           one generated into <dir>/admin.password (mode 600). Set on the first start only: the
#                           admin is created then, and later starts keep it. Passwords are never printed.
#   DLBENCH_PG_BIN          PostgreSQL's programs (default: the newest /usr/lib/postgresql/*/bin)
#   DLBENCH_PG_OS_USER      the account PostgreSQL runs as when this script runs as root (PostgreSQL refuses
#                           root): default `postgres`, else `dlbench-pg`, created if missing
#   DLBENCH_VENV            the environment whose `mlflow` runs the server (default <repo>/.venv, else PATH)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${DLBENCH_SERVER_DIR:-$root/.server}"
host="${DLBENCH_SERVER_HOST:-127.0.0.1}"
port="${DLBENCH_SERVER_PORT:-5050}"
workers="${DLBENCH_SERVER_WORKERS:-2}"
pg_port="${DLBENCH_PG_PORT:-5433}"
auth="${DLBENCH_SERVER_AUTH:-0}"
admin="${DLBENCH_SERVER_USER:-admin}"
db_role=dlbench
pgdata="$dir/pg"

die() { echo "server: $*" >&2; exit 1; }

pg_bin() {
  if [ -n "${DLBENCH_PG_BIN:-}" ]; then echo "$DLBENCH_PG_BIN"; return; fi
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  [ -n "$newest" ] || die "PostgreSQL is not installed: apt-get install -y postgresql (or set DLBENCH_PG_BIN)"
  echo "$newest"
}

mlflow_bin() {
  local venv="${DLBENCH_VENV:-$root/.venv}"
  if [ -x "$venv/bin/mlflow" ]; then echo "$(cd "$venv/bin" && pwd)/mlflow"; return; fi
  command -v mlflow || die "no mlflow in $venv or on PATH: run make setup (or set DLBENCH_VENV)"
}

# PostgreSQL refuses to run as root: as root, run its programs as a non-root account.
pg_user() {
  [ "$(id -u)" -eq 0 ] || { id -un; return; }
  local user="${DLBENCH_PG_OS_USER:-}"
  if [ -z "$user" ]; then
    if id postgres >/dev/null 2>&1; then user=postgres; else user=dlbench-pg; fi
  fi
  if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user" \
      || die "cannot create the account $user for PostgreSQL (set DLBENCH_PG_OS_USER to an existing one)"
  fi
  echo "$user"
}

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$PGUSER" -- "$@"; else "$@"; fi
}

# A random secret from the kernel, never echoed.
secret() { head -c 24 /dev/urandom | base64 | tr -d '/+=\n'; }

# Write a secret file readable by this user only (umask before the file exists: no window).
write_secret() { ( umask 077; printf '%s\n' "$2" >"$1" ); }

pg_running() { as_pg "$PG/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; }

pg_init() {
  [ -f "$pgdata/PG_VERSION" ] && return
  echo "server: creating PostgreSQL's data directory $pgdata (role $db_role, password in $dir/pgpass)"
  local password pwfile
  password=$(secret)
  # libpq reads the password from this file (PGPASSFILE): it never appears in a URI, a command line or a log.
  write_secret "$dir/pgpass" "127.0.0.1:*:*:$db_role:$password"
  install -d -m 700 -o "$PGUSER" "$pgdata" "$dir/pglog"
  pwfile=$(mktemp)
  printf '%s\n' "$password" >"$pwfile"
  chown "$PGUSER" "$pwfile"
  as_pg "$PG/initdb" -D "$pgdata" -U "$db_role" --pwfile="$pwfile" --auth=scram-sha-256 -E UTF8 --no-locale \
    >"$dir/initdb.log" 2>&1 || { rm -f "$pwfile"; die "initdb failed: see $dir/initdb.log"; }
  rm -f "$pwfile"
}

pg_start() {
  if ! as_pg test -x "$dir"; then
    die "PostgreSQL's account $PGUSER cannot enter $dir; set DLBENCH_SERVER_DIR to a directory it can reach"
  fi
  pg_init
  if ! pg_running; then
    # TCP on loopback only, no Unix socket: nothing outside this machine can reach the database.
    as_pg "$PG/pg_ctl" -D "$pgdata" -l "$dir/pglog/postgres.log" -w -t 120 \
      -o "-p $pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" start >/dev/null \
      || die "PostgreSQL did not start: see $dir/pglog/postgres.log"
  fi
  local name
  for name in mlflow mlflow_auth; do
    if [ -z "$(psql_q "SELECT 1 FROM pg_database WHERE datname = '$name'")" ]; then
      PGPASSFILE="$dir/pgpass" "$PG/createdb" -h 127.0.0.1 -p "$pg_port" -U "$db_role" "$name"
    fi
  done
}

psql_q() {
  PGPASSFILE="$dir/pgpass" "$PG/psql" -h 127.0.0.1 -p "$pg_port" -U "$db_role" -d postgres -tAc "$1"
}

admin_password() {
  if [ -n "${DLBENCH_SERVER_PASSWORD:-}" ]; then printf '%s' "$DLBENCH_SERVER_PASSWORD"; return; fi
  local file="${DLBENCH_SERVER_PASSWORD_FILE:-$dir/admin.password}"
  if [ ! -f "$file" ]; then
    [ -z "${DLBENCH_SERVER_PASSWORD_FILE:-}" ] || die "DLBENCH_SERVER_PASSWORD_FILE=$file does not exist"
    write_secret "$file" "$(secret)"
  fi
  head -n1 "$file" | tr -d '\n'
}

healthy() { curl -fsS -o /dev/null --max-time 2 "http://$host:$port/health" 2>/dev/null; }

server_pid() { [ -f "$dir/mlflow.pid" ] && cat "$dir/mlflow.pid" || true; }

# Alive while any process of the server's group (the server and its workers) is.
group_alive() { [ -n "$1" ] && kill -0 -- "-$1" 2>/dev/null; }

mlflow_start() {
  local pid args=() env=(
    "PGPASSFILE=$dir/pgpass"
    # dlbench submits no MLflow jobs: no background job runners (more processes each importing MLflow)
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false"
  )
  pid=$(server_pid)
  if group_alive "$pid"; then echo "server: mlflow server already running (process group $pid)"; return; fi
  args=(
    --backend-store-uri "postgresql+psycopg2://$db_role@127.0.0.1:$pg_port/mlflow"
    --serve-artifacts --artifacts-destination "$dir/artifacts" --default-artifact-root mlflow-artifacts:/
    --host "$host" --port "$port" --workers "$workers"
  )
  if [ "$auth" = 1 ]; then
    local password
    password=$(admin_password)
    [ "${#password}" -ge 12 ] || die "the admin password must have at least 12 characters (MLflow's rule)"
    [ -f "$dir/flask.secret" ] || write_secret "$dir/flask.secret" "$(secret)"
    write_auth_ini
    args+=(--app-name basic-auth)
    env+=(
      "MLFLOW_AUTH_CONFIG_PATH=$dir/basic_auth.ini"
      "MLFLOW_AUTH_ADMIN_PASSWORD=$password"
      "MLFLOW_FLASK_SERVER_SECRET_KEY=$(cat "$dir/flask.secret")"
    )
  fi
  mkdir -p "$dir/artifacts"
  # Its own session: `stop` ends the server and every worker it forked by process group. The secrets go
  # through the environment of this one process, never its command line (visible in ps) or its log.
  (cd "$dir" && exec env "${env[@]}" setsid "$MLFLOW" server "${args[@]}" >"$dir/mlflow.log" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$dir/mlflow.pid"
  local deadline=$((SECONDS + ${DLBENCH_SERVER_START_S:-180}))
  until healthy; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/mlflow.log" >&2
      die "mlflow server exited; its log is $dir/mlflow.log"
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "mlflow server not healthy after ${DLBENCH_SERVER_START_S:-180}s: $dir/mlflow.log"
    sleep 1
  done
}

write_auth_ini() {
  cat >"$dir/basic_auth.ini" <<EOF
[mlflow]
default_permission = READ
database_uri = postgresql+psycopg2://$db_role@127.0.0.1:$pg_port/mlflow_auth
admin_username = $admin
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
EOF
}

start() {
  mkdir -p "$dir"
  chmod 755 "$dir"
  PG=$(pg_bin)
  PGUSER=$(pg_user)
  MLFLOW=$(mlflow_bin)
  pg_start
  mlflow_start
  echo "server: PostgreSQL on 127.0.0.1:$pg_port (data $pgdata), artifacts in $dir/artifacts"
  echo "server: MLflow at http://$host:$port (log $dir/mlflow.log); use it with"
  echo "  python src/run.py tracking=server ...        (or: export MLFLOW_TRACKING_URI=http://$host:$port)"
  if [ "$auth" = 1 ]; then
    local file="${DLBENCH_SERVER_PASSWORD_FILE:-$dir/admin.password}"
    [ -n "${DLBENCH_SERVER_PASSWORD:-}" ] && file='$DLBENCH_SERVER_PASSWORD'
    echo "  basic auth: export MLFLOW_TRACKING_USERNAME=$admin MLFLOW_TRACKING_PASSWORD=<the password in $file>"
  fi
  echo "MLFLOW_TRACKING_URI=http://$host:$port"
}

stop() {
  local pid
  pid=$(server_pid)
  if group_alive "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while group_alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
    if group_alive "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
    echo "server: mlflow server stopped"
  fi
  rm -f "$dir/mlflow.pid"
  if [ -f "$pgdata/PG_VERSION" ]; then
    PG=$(pg_bin)
    PGUSER=$(pg_user)
    if pg_running; then
      as_pg "$PG/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null
      echo "server: PostgreSQL stopped"
    fi
  fi
}

status() {
  local pid rc=0
  pid=$(server_pid)
  if group_alive "$pid" && healthy; then echo "mlflow server: running at http://$host:$port"; else
    echo "mlflow server: stopped"; rc=3; fi
  if [ -f "$pgdata/PG_VERSION" ]; then
    PG=$(pg_bin)
    PGUSER=$(pg_user)
    if pg_running; then echo "PostgreSQL: running on 127.0.0.1:$pg_port"; else echo "PostgreSQL: stopped"; rc=3; fi
  else
    echo "PostgreSQL: not created yet ($pgdata)"; rc=3
  fi
  return "$rc"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: scripts/setup/server.sh start|stop|status" ;;
esac
