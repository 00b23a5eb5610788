#!/usr/bin/env bash
# Writes docs/benchmarks.md from the latest `make bench` run: what each part measures, then the
# figures every bench printed (target/bench/*.txt). With target/bench/api-base.txt (BENCH_BASE),
# the API bench's ratios of both revisions side by side. Run by `make bench`; prints to stdout.
set -euo pipefail
dir=${1:-target/bench}
base_rev=${BENCH_BASE:-}

block() { # title file
  [ -s "$2" ] || return 0
  printf '\n### %s\n\n```\n' "$1"
  sed '/./,$!d' "$2"
  printf '```\n'
}

# The lines of a bench's output that carry a ratio ("name   1.23x  target >= 1.00x  met"), as
# "name<TAB>1.23x": the first ratio on the line and the words before it. Lines listing several
# ratios in a sentence ("…: a 0.77x, b 0.90x") are left out.
ratios() {
  awk '{
    if ($0 ~ /[0-9.]+x,/ || $1 == "limit,") next
    for (i = 2; i <= NF; i++) if ($i ~ /^[0-9.]+x$/) {
      name = $1; for (j = 2; j < i; j++) name = name " " $j
      sub(/:$/, "", name); print name "\t" $i; next
    }
  }' "$1"
}

cat <<'HEAD'
# Benchmarks

Written by `make bench` from its latest run (the figures below are that run's, nothing else).
Every target is checked against a reference measured in the same run on the same machine:
these machines wander by tens of per cent over minutes, so read the ratios, not the rates.

- **payment-api** (`crates/payment-api/benches/api.rs`): `wrk` (its own process, 32 connections)
  against the server on SQLite as the embedded default runs it (its gateway simulator's ledger
  in its own database) — first executions and replays — beside SQLite's raw durable commit rate
  and a bare endpoint doing the same INSERT without idempotency; then, **as deployed**
  (`benches/api/deployed.rs`), five interleaved rounds beside **the peer** (an axum app with
  `axum-idempotent` 0.6.0, keys in memory) and a **ceiling** (a route answering one fixed stored
  answer, doing nothing else), every server a release process of its own started fresh for each
  run, and Pagar and the peer both charging cards at **one acquirer process** per round
  (`adquirente`, release, its ledger durable on a file of its own: Mercado Pago's
  `POST /v1/orders` under `X-Idempotency-Key`); first executions at 32 and 256 connections,
  counting the fsyncs of Pagar's own database (the `slowsync` shim with no delay), and on a
  **slow disk** (every fsync of Pagar's process, never the acquirer's, made to wait 2 ms, writes
  untouched, so the figure does not depend on this machine's disk) beside a durable commit alone
  on that disk; 50 concurrent requests with one key against each, charges counted in the
  acquirer's ledger; then the PostgreSQL store with one and three replicas (release processes,
  charging at one acquirer process, as deployed) beside PostgreSQL's raw commit rate, with the
  CPU (PostgreSQL's, the replicas', the acquirer's, wrk's) and WAL per operation read from
  `/proc` and `pg_current_wal_lsn`, and what two cores allow with PostgreSQL at its floor (two
  raw commits an execution: the claim and the completion); then **flat as the store grows** (`benches/api/grown.rs`): five
  interleaved rounds of Pagar's first executions and replays (read from the database, its cache
  off) on a database holding 10 million keys and their payments against an empty one (a release
  process per run, charging at an acquirer process), the grown database made from a few seconds
  of real first executions whose rows are copied under ids of their own, and before each run a
  minute's expiry of a store keeping ten million keys a day (6 944 keys), or a backlog of 100 000,
  moved past the retention so that its reaper (every second) purges beside the load, in paced
  writes of 100 keys and, for the backlog, also in writes of 100 000 (one statement a pass); what
  a run's reaper left of its slice is deleted outside the runs before the next grown run.
- **checkout-core** (`crates/checkout-core/benches/outbox.rs`; the pay part and the drain part
  each in a process of its own, as an app is one process with one outbox): `Checkout::pay` until durable,
  online (the payment API a release process of its own, as a store runs it, and in the app's
  process, as the embedded sandbox runs it) and offline, beside SQLite's raw durable commit,
  a raw commit as large as a pay's alone and each while the server executes a card payment (the
  floor for any till beside that server), and
  one durable write through `durable-sqlite` alone, and with the server's database on another
  disk (tmpfs: its fsyncs off the till's disk, as on a machine of its own), each with where its
  writes spent their time by the outbox writer's own clock (`durable_sqlite::Timings`: waiting
  for the writer, behind a relaxed commit, running, `COMMIT`; checkpoints) and, write by write,
  whether the writer was on a core, waiting for one or blocked on the disk in each phase (its CPU
  clock and the kernel's per-thread `schedstat`); queueing 10 000 and 100 000 payments offline and
  draining them into the API (its own process), beside it answering as many first requests
  alone, and a sale's cost in the queue of 100 000 against the queue of 10 000 (linear: 1.00x).
- **the app** (`src-tauri/benches/startup.rs`): the optimised app under Xvfb, time to the first
  painted window, and memory (PSS of the process and its WebKit children) idle and after 1 000
  sales sold through the window (three sessions of the app, each on a fresh data folder: one
  session's growth swings by several MiB, so the session with the median growth is reported and
  the three growths printed), beside a bare Tauri window (`blank_window`) started the same way,
  and, for the growth, that bare window making the IPC calls Pagar's page made (counted in the
  page over its first 100 sales: the same commands, as many, arguments and answers of the same
  sizes) for 1 000 sales, with no page work; and, inside the web process, the page's
  JavaScript heap, live after JavaScriptCore's last full collection (its own log: `JSC_logGC=1`
  in the app's environment), so that its growth can be told apart from WebKit's own memory.

What limits a target the run says is not met is measured in the same run and printed on a line
of its own beginning `limit` (collected under *Targets, and what limits them* below): the floor a
slow disk sets (a durable commit alone on it), the CPU each server process spends per request
with the cores' idle share, what two cores allow at the machine's CPU per first execution (the
server's, the acquirer's, wrk's and the kernel's: the bound Pagar and the peer both meet once the
cores are busy), each step's mean from the server's `/metrics`, where 1.1x the peer's replays
stands against the ceiling (the same HTTP stack doing no work), the CPU and WAL per
PostgreSQL execution, a durable commit's p99 for `pay`, the CPU a drained sale costs the server,
the till and the machine against the server alone's (and whether the cores are what bounds it),
where the memory is. The app's memory is
read after WebKit's own memory-pressure signal (its UI process watches its memory cgroup; the
bench holds that cgroup's limit just above its use until the signal is sent), median of three. Two
choices are kept only for a figure here: the request log written by a thread of its own
(`payment_api::logging`; the line `Pagar replays, logging on / logging off`) and the window's
crates built for size (`[profile.release.package.*]` in `Cargo.toml`; the lines `idle, against
the bare window` and `where it is`).
HEAD

printf '\n## Latest run\n\n%s, revision `%s`, %s cores (%s).\n' \
  "$(date -u +%Y-%m-%d)" "$(git rev-parse --short HEAD)" "$(nproc)" \
  "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"

printf '\n### Targets, and what limits them\n\nEvery target line of the run, each followed where it is not met by what the run measured of its limit.\n\n```\n'
for f in "$dir/api.txt" "$dir/outbox.txt" "$dir/startup.txt"; do
  [ -s "$f" ] && grep -E 'target (>=|<=).*met$|^limit' "$f" || true
done
printf '```\n'

block "payment-api" "$dir/api.txt"
block "checkout-core" "$dir/outbox.txt"
block "The app" "$dir/startup.txt"

if [ -s "$dir/api-base.txt" ]; then
  printf '\n## Against revision `%s`\n\n' "$base_rev"
  printf 'The API bench built from `%s` in a worktree of its own (`make bench BENCH_BASE=%s`) and run\n' "$base_rev" "$base_rev"
  printf 'on this machine beside this run; each ratio is from its own run:\n\n| ratio | `%s` | this run |\n| --- | --- | --- |\n' "$base_rev"
  join -t $'\t' -a 2 -e '—' -o 0,1.2,2.2 \
    <(ratios "$dir/api-base.txt" | sort -t $'\t' -k1,1) \
    <(ratios "$dir/api.txt" | sort -t $'\t' -k1,1) \
    | awk -F'\t' '{ printf "| %s | %s | %s |\n", $1, $2, $3 }'
  block "payment-api at \`$base_rev\`" "$dir/api-base.txt"
fi
