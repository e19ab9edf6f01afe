"""The results database (harness/results/schema.sql) as plain dicts: a SQLite file or a
postgresql:// URL. Reports only read; scripts/nightly also writes the kernel benchmarks it runs
(the C++ writer behind `cpullm bench --db` writes everything else)."""
import json
import os
import re
import sqlite3
from dataclasses import dataclass, field

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "results", "schema.sql")


class DatabaseError(Exception):
    """A database that cannot be opened or read; the message names it."""


@dataclass
class Contents:
    """Everything a report shows, loaded once."""
    runs: dict = field(default_factory=dict)     # run id -> runs row
    results: list = field(default_factory=list)  # results rows, config_json/metrics_json parsed into "config"/"metrics"
    samples: dict = field(default_factory=dict)  # result id -> samples rows, by repetition
    regions: dict = field(default_factory=dict)  # result id -> regions rows


class Database:
    """One connection; `?` placeholders in every query, translated for PostgreSQL."""

    def __init__(self, target):
        self.target = target
        self.postgres = target.startswith(("postgresql://", "postgres://"))
        try:
            if self.postgres:
                import psycopg2  # Debian's python3-psycopg2; only needed for PostgreSQL
                self.connection = psycopg2.connect(target)
            else:
                if not os.path.isfile(target):
                    raise DatabaseError(f"{target}: no such database file")
                self.connection = sqlite3.connect(target)
        except ImportError:
            raise DatabaseError(f"{target}: reading PostgreSQL needs python3-psycopg2 (apt-get install python3-psycopg2)")
        except DatabaseError:
            raise
        except Exception as e:  # sqlite3.Error, psycopg2.Error: both say what went wrong
            raise DatabaseError(f"{target}: cannot open: {e}")

    @classmethod
    def create(cls, path):
        """A new SQLite file with every migration of schema.sql applied and recorded in
        schema_version, as the C++ writer leaves it (tests build their databases this way)."""
        with open(SCHEMA) as f:
            schema = f.read()
        versions = [int(m) for m in re.findall(r"^-- migration (\d+):", schema, re.M)]
        connection = sqlite3.connect(path)
        connection.executescript(schema)
        connection.executemany("INSERT INTO schema_version (version) VALUES (?)", [(v,) for v in versions])
        connection.commit()
        connection.close()
        return cls(path)

    def query(self, sql, params=()):
        if self.postgres:
            sql = sql.replace("?", "%s")
        try:
            cursor = self.connection.cursor()
            cursor.execute(sql, params)
            names = [c[0] for c in cursor.description] if cursor.description else []
            return [dict(zip(names, row)) for row in cursor.fetchall()] if names else []
        except Exception as e:
            raise DatabaseError(f"{self.target}: {e} (in: {sql.split()[0]} ...)")

    def insert(self, table, row):
        """Inserts one row (a dict of column -> value); returns its id where the table has one.
        Nothing is visible to others until commit(): one transaction per stored run, not a disk
        sync per row."""
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        returning = " RETURNING id" if table in ("runs", "results") else ""
        sql = f"INSERT INTO {table} ({columns}) VALUES ({marks}){returning}"
        rows = self.query(sql, tuple(row.values()))
        return rows[0]["id"] if rows else None

    def commit(self):
        self.connection.commit()

    def load(self, run_ids=None):
        """The runs (all, or those in run_ids) with their results, samples and regions."""
        where, params = "", ()
        if run_ids:
            where = f" WHERE id IN ({', '.join('?' * len(run_ids))})"
            params = tuple(run_ids)
        contents = Contents()
        contents.runs = {r["id"]: r for r in self.query("SELECT * FROM runs" + where + " ORDER BY id", params)}
        missing = set(run_ids or ()) - set(contents.runs)
        if missing:
            raise DatabaseError(f"{self.target}: no run with id {', '.join(map(str, sorted(missing)))}")
        run_filter = where.replace(" id IN", " run_id IN")
        for row in self.query("SELECT * FROM results" + run_filter + " ORDER BY id", params):
            row["config"] = parse_json(row.get("config_json"))
            row["metrics"] = parse_json(row.get("metrics_json"))
            contents.results.append(row)
        result_filter = f" WHERE result_id IN (SELECT id FROM results{run_filter})"
        for row in self.query("SELECT * FROM samples" + result_filter + " ORDER BY result_id, repetition", params):
            contents.samples.setdefault(row["result_id"], []).append(row)
        for row in self.query("SELECT * FROM regions" + result_filter, params):
            contents.regions.setdefault(row["result_id"], []).append(row)
        return contents


def parse_json(text):
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"unparsed": text}
    return value if isinstance(value, dict) else {"value": value}
