-- The cpullm results database. SQLite (WAL) by default, the same tables on PostgreSQL.
-- Written by `cpullm bench --db` and the sweep driver; read by reports and nightly.
-- Field names follow llama-bench's JSON wherever the meaning is the same. docs/results-db.md
-- describes every column.
--
-- The schema is this list of migrations, applied in order: a new database runs them all, an
-- older one those above the highest version in schema_version (harness/results/schema.cpp).
-- Change the schema by appending a migration, never by editing one that has shipped. The SQL
-- is written for SQLite; on PostgreSQL INTEGER PRIMARY KEY becomes BIGSERIAL PRIMARY KEY,
-- INTEGER BIGINT and REAL DOUBLE PRECISION (harness/results/backend_postgres.cpp).

-- migration 1: runs, results, samples, regions.
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);  -- one row per migration applied

-- One invocation of a command (bench, sweep, nightly, kernels).
CREATE TABLE IF NOT EXISTS runs (
  id            INTEGER PRIMARY KEY,   -- BIGSERIAL on PostgreSQL
  kind          TEXT NOT NULL,         -- bench | sweep | nightly | kernels | tune
  command       TEXT NOT NULL,         -- the full command line
  started_at    TEXT NOT NULL,         -- ISO 8601 UTC
  finished_at   TEXT,                  -- NULL while unfinished (what --resume looks for)
  git_commit    TEXT,                  -- build's commit, "-dirty" appended when the tree was
  host          TEXT NOT NULL,         -- hostname
  cpu_model     TEXT, cores INTEGER, sockets INTEGER, numa_nodes INTEGER, memory_bytes INTEGER,
  kernel        TEXT, isa_level TEXT, governor TEXT,
  fingerprint   TEXT NOT NULL          -- hash of cpu_model, cores, sockets, numa_nodes, memory: "same host"
);

-- One measured point: a configuration and its summary metrics. Committed when it finishes.
CREATE TABLE IF NOT EXISTS results (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  case_name     TEXT NOT NULL,         -- stable name of the case for history, e.g. "pp512/q8_0/t2"
  test          TEXT NOT NULL,         -- pp | tg | pg | load | multiproc | kernel
  model_filename TEXT, model_type TEXT, model_size INTEGER, model_n_params INTEGER,
  format        TEXT,                  -- weight format: f32 f16 bf16 q8_0 q4_0 int8-channel (+ sparsity)
  isa           TEXT, n_threads INTEGER, binding TEXT, cpuset TEXT, numa TEXT,
  attn_tile     TEXT, kv_type TEXT, n_batch INTEGER, n_seq INTEGER,
  n_prompt      INTEGER, n_gen INTEGER,
  config_json   TEXT NOT NULL,         -- every option of the point, long names, as JSON
  avg_ns        REAL, stddev_ns REAL, avg_ts REAL, stddev_ts REAL,
  ttft_ms       REAL, tpot_ms REAL, itl_p50_ms REAL, itl_p90_ms REAL, itl_p99_ms REAL,
  peak_rss_bytes INTEGER, energy_j REAL,
  metrics_json  TEXT                   -- anything else (load-scenario rates, sharing savings, regions)
);

-- Every repetition of a point: what the statistics and the nightly tests run on.
CREATE TABLE IF NOT EXISTS samples (
  result_id     INTEGER NOT NULL REFERENCES results(id),
  repetition    INTEGER NOT NULL,
  ns            REAL NOT NULL,         -- wall time of the repetition
  ts            REAL,                  -- tokens/s of the repetition
  metrics_json  TEXT
);

-- Per-region profile of a point (cpullm profile / bench --profile): the roofline inputs.
CREATE TABLE IF NOT EXISTS regions (
  result_id     INTEGER NOT NULL REFERENCES results(id),
  name          TEXT NOT NULL,         -- embedding, attn_norm, q_proj, ... lm_head, sampling
  calls         INTEGER NOT NULL,
  seconds       REAL NOT NULL,
  flops         REAL NOT NULL,
  bytes         REAL NOT NULL,
  counters_json TEXT                   -- hardware counters where available, else why not
);

-- migration 2: cpullm bench's placement, prefetch and test_time; a case name unique within its
-- run (what --resume skips by); indexes for the lookups every writer and report makes.
ALTER TABLE results ADD COLUMN placement TEXT;    -- NUMA weight placement: first-touch | interleave | replicate | shard
ALTER TABLE results ADD COLUMN prefetch INTEGER;  -- 1: the next layer's weights prefetched while this one computes
ALTER TABLE results ADD COLUMN test_time TEXT;    -- ISO 8601 UTC when the point ran (llama-bench's test_time)
CREATE UNIQUE INDEX IF NOT EXISTS results_run_case ON results (run_id, case_name);
CREATE INDEX IF NOT EXISTS samples_result ON samples (result_id);
CREATE INDEX IF NOT EXISTS regions_result ON regions (result_id);
CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (kind, finished_at);  -- not on command: PostgreSQL caps an index entry at ~2.7 kB

-- migration 3: generated and prompt tokens per second apart. avg_ts counts both, as llama-bench's
-- does; a serving throughput (the report's TCO) counts only the generated tokens.
ALTER TABLE results ADD COLUMN gen_ts REAL;     -- n_seq x n_gen / the repetition's whole time (prefill included); NULL without generated tokens
ALTER TABLE results ADD COLUMN prompt_ts REAL;  -- n_seq x n_prompt / the prefill's time; NULL without a prompt

-- migration 4: llama-bench's depth: the positions filled, untimed, before a test (bench -d).
ALTER TABLE results ADD COLUMN n_depth INTEGER;  -- NULL in results stored before it

-- migration 5: which engine measured a point: cpullm's own runs, or a peer's (llama.cpp's
-- llama-bench, run by `bench --engine` or imported by `db import`), with its version and build.
ALTER TABLE results ADD COLUMN engine TEXT;          -- cpullm | llama.cpp
ALTER TABLE results ADD COLUMN engine_version TEXT;  -- cpullm: its version; llama.cpp: llama-bench's build_number
ALTER TABLE results ADD COLUMN engine_commit TEXT;   -- the engine's build commit (llama-bench's build_commit)
UPDATE results SET engine = 'cpullm' WHERE engine IS NULL;
