#!/usr/bin/env bash
# The claim cycle (cycle.sql) through pgbench with branch_rules' touch trigger counting
# revisions and with the plain touch it replaced, alternating on one database: what the
# revision costs the claim path. Run as root after `cargo build -p res-functions` (it starts
# a throwaway PostgreSQL as the postgres user); docs/benchmarks.md has the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d); chown postgres "$dir"
bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
runuser -u postgres -- $bin/initdb -D "$dir/data" -A trust -U postgres >/dev/null
runuser -u postgres -- $bin/pg_ctl -D "$dir/data" -o "-k $dir -c listen_addresses='' -c fsync=off -p 55432" -l "$dir/log" -w start >/dev/null
trap 'runuser -u postgres -- $bin/pg_ctl -D "$dir/data" -m immediate stop >/dev/null; rm -rf "$dir"' EXIT
psql="psql -h $dir -p 55432 -U postgres -v ON_ERROR_STOP=1 -q"
$psql -c "CREATE DATABASE ab"
DATABASE_URL="postgres://postgres@localhost/ab?host=$dir&port=55432" $root/target/debug/res-functions migrate >/dev/null
$psql ab <<'SQL'
INSERT INTO brands (name) VALUES ('bench');
INSERT INTO branches (brand_id, name) SELECT b.id, 'branch ' || g FROM brands b, generate_series(1, 100) g;
INSERT INTO rules (name, status, cron_expression) SELECT 'rule ' || g, 'active', '* * * * * *' FROM generate_series(1, 100) g;
INSERT INTO branch_rules (branch_id, rule_id, next_run_time) SELECT b.id, r.id, now() FROM branches b, rules r;
CREATE TABLE bench_rules AS SELECT row_number() OVER (ORDER BY id) AS n, id FROM branch_rules;
CREATE UNIQUE INDEX ON bench_rules (n);
CREATE FUNCTION res_touch_plain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;
SQL
branches="{$($psql -At ab -c "SELECT string_agg(id::text, ',') FROM branches")}"
use() { $psql ab -c "DROP TRIGGER branch_rules_touch ON branch_rules; CREATE TRIGGER branch_rules_touch BEFORE UPDATE ON branch_rules FOR EACH ROW EXECUTE FUNCTION $1();"; }
run() {
    $psql ab -c "VACUUM ANALYZE branch_rules" -c "VACUUM ANALYZE executions" -c "CHECKPOINT"
    out=$(pgbench -n -M prepared -c 8 -j 2 -T 10 -U postgres -h $dir -p 55432 \
        -D key_id=00000000-0000-0000-0000-000000000000 -D "branches=$branches" \
        -f $root/functions/benches/cycle.sql ab 2>&1) || { echo "pgbench failed: $out"; exit 1; }
    if grep -q "ERROR\|failed transactions: [1-9]" <<<"$out"; then echo "pgbench errors: $out"; exit 1; fi
    sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out"
}
# ABBA rounds, so drift over the run (a growing executions table) falls on both sides.
for round in 1 2 3; do
    use res_touch_plain; a1=$(run)
    use res_touch_branch_rule; b1=$(run)
    b2=$(run)
    use res_touch_plain; a2=$(run)
    echo "round $round: plain $a1 $a2 counting $b1 $b2 ratio $(python3 -c "print(f'{($b1+$b2)/($a1+$a2):.3f}')")"
done
