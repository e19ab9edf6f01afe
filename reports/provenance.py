"""The runs behind the report: host, CPU, commit, command line and dates of every run shown."""
from .page import Section, esc, no_data, table


def build(contents, context):
    if not contents.runs:
        return Section("runs", "Runs and hosts", no_data("any run", "cpullm bench -m MODEL --db results.db"))
    rows = [[esc(r["id"]), esc(r["kind"]), esc(r["host"]), esc(r.get("cpu_model")), esc(r.get("cores")), esc(r.get("sockets")),
             esc(r.get("numa_nodes")), esc(r.get("isa_level")), esc(r.get("git_commit")), esc(r["started_at"]),
             esc(r.get("finished_at") or "unfinished"), f"<code>{esc(r['command'])}</code>", esc(r["fingerprint"])]
            for r in contents.runs.values()]
    return Section("runs", "Runs and hosts", table(["run", "kind", "host", "CPU", "cores", "sockets", "NUMA nodes", "ISA", "commit",
                                                     "started", "finished", "command", "host fingerprint"], rows))
