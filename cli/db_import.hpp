// cpullm db import: runs and their points from JSON into the results database, so that the one
// writer of the database (harness/results) stores what other programs measured too: the sweep
// driver's evaluations, scripts/nightly's kernel benchmarks, the tests' synthetic histories.
#pragma once
#include <string>

#include "harness/results/results_db.hpp"

namespace cpullm::cli {

// Reads `path` ("-": stdin): what `cpullm db results RUN --export-json` prints, {"run": {...},
// "results": [...]}, or an array of such documents. Each run gets the fields given (column names
// of `runs`; "id" and "points" are ignored) and, for those absent, now, this build's commit and
// this host; a result the fields of `results` plus its "samples" and "regions" (a *_json field may
// be an object). resume: each document's points go into the last unfinished run of its kind and
// command on its host, skipping case names it has, and a finished_at given finishes that run; else
// each document is a new run. Prints one line per run. Errors name the file, run and field.
// Or llama.cpp's llama-bench output (-o json, jsonl or sql, llama_bench_output.hpp): one finished
// run of kind "import", its tests as results of engine llama.cpp, on the machine host_name names
// (empty: this one).
void import_runs(ResultsDb& db, const std::string& path, bool resume, const std::string& host_name = "");

}  // namespace cpullm::cli
