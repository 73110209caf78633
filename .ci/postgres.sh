# Sourced by .ci/run: a private PostgreSQL cluster for the store tests (the Debian `postgresql`
# package, run as the unprivileged user `keelpg` on 127.0.0.1:55432, trust auth on loopback
# only), with database `keel_test`; exports KEEL_TEST_DATABASE_URL. Idempotent and quiet: a
# cluster that is already running is reused.
keel_pg_port=55432
keel_pg_dir=/var/lib/keel-ci-pg
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
fi
keel_pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
id keelpg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin keelpg
if [ ! -s "$keel_pg_dir/data/PG_VERSION" ]; then
  mkdir -p "$keel_pg_dir"
  chown keelpg "$keel_pg_dir"
  runuser -u keelpg -- "$keel_pg_bin/initdb" -D "$keel_pg_dir/data" -U keelpg \
    --auth-local=trust --auth-host=trust -E UTF8 >/dev/null
fi
if ! runuser -u keelpg -- "$keel_pg_bin/pg_ctl" -D "$keel_pg_dir/data" status >/dev/null 2>&1; then
  if ! runuser -u keelpg -- "$keel_pg_bin/pg_ctl" -D "$keel_pg_dir/data" -l "$keel_pg_dir/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -p $keel_pg_port -k $keel_pg_dir -c max_connections=300" \
      start >"$keel_pg_dir/pg_ctl.log" 2>&1 \
    && ! runuser -u keelpg -- "$keel_pg_bin/pg_ctl" -D "$keel_pg_dir/data" status >/dev/null 2>&1; then
    # (A start that lost a race with another shell's start finds the cluster running: fine.)
    echo "PostgreSQL did not start:" >&2
    cat "$keel_pg_dir/pg_ctl.log" "$keel_pg_dir/server.log" >&2
    return 1
  fi
fi
# A cluster recovering from an unclean stop (or starting on a loaded machine) answers "the
# database system is starting up" for a while after pg_ctl's own wait: wait for it (5 min).
for _ in $(seq 1 300); do
  "$keel_pg_bin/pg_isready" -q -h 127.0.0.1 -p "$keel_pg_port" && break
  sleep 1
done
# Test databases earlier runs left behind (a test that failed or was killed does not drop
# its own): they made the cluster's recovery after an unclean stop take minutes. One in use
# (no FORCE) is left alone.
psql -h 127.0.0.1 -p "$keel_pg_port" -U keelpg -d postgres -tAc \
    "SELECT datname FROM pg_database WHERE datname LIKE 'keel\_%' AND datname <> 'keel_test'" \
  | while read -r db; do
      [ -n "$db" ] && psql -h 127.0.0.1 -p "$keel_pg_port" -U keelpg -d postgres -qc \
        "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true
    done
if ! psql -h 127.0.0.1 -p "$keel_pg_port" -U keelpg -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'keel_test'" | grep -q 1; then
  psql -h 127.0.0.1 -p "$keel_pg_port" -U keelpg -d postgres -qc "CREATE DATABASE keel_test" >/dev/null
fi
export KEEL_TEST_DATABASE_URL="postgres://keelpg@127.0.0.1:$keel_pg_port/keel_test"
