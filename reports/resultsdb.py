"""The results database (harness/results/schema.sql) as plain dicts: a SQLite file, or
PostgreSQL named by a postgresql:// URL or a libpq conninfo string (`host=... dbname=...`),
whose password may also come from PGPASSWORD or PGPASSFILE, as libpq reads them; opened
read-only. cpullm is its one writer (`cpullm bench --db`, and `cpullm db import` for runs
measured by other programs)."""
import json
import os
import re
import sqlite3
import urllib.parse
from dataclasses import dataclass, field

# Read for its newest migration's number only (check_schema): the tables are cpullm's to make.
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "results", "schema.sql")

# PostgreSQL's two forms, as harness/results tells them from an SQLite path: a URL, or a conninfo
# string, which starts with a libpq keyword and "=" (an SQLite file named so is written ./NAME).
POSTGRES = re.compile(r"^(postgres(ql)?://|\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")
# Where a password stands: the URL's user:PASSWORD@, its ?password= parameter, conninfo's
# password=VALUE (quoted or not). The same patterns as harness/results/results_db.cpp.
PASSWORDS = [(re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)[^@/\s]*@"), r"\1***@"),
             (re.compile(r"([?&]password=)[^&#\s]*"), r"\1***"),
             (re.compile(r"((?:^|[\s=])password\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|[^\s\\])+)"), r"\1***")]


def is_postgres(location):
    """Whether --db names a PostgreSQL database rather than an SQLite file."""
    return bool(POSTGRES.match(location))


def without_password(text):
    """`text` with every PostgreSQL password in it masked as ***: for anything printed or stored."""
    for pattern, replacement in PASSWORDS:
        text = pattern.sub(replacement, text)
    return text


class DatabaseError(Exception):
    """A database that cannot be opened or read; the message names it."""


@dataclass
class Contents:
    """Everything a report shows, loaded once."""
    runs: dict = field(default_factory=dict)     # run id -> runs row
    results: list = field(default_factory=list)  # cpullm's results rows, config_json/metrics_json parsed into "config"/"metrics"
    peers: list = field(default_factory=list)    # the same of other engines (llama.cpp): only the Peers section reads them
    samples: dict = field(default_factory=dict)  # result id -> samples rows, by repetition
    regions: dict = field(default_factory=dict)  # result id -> regions rows


class Database:
    """One read-only connection; `?` placeholders in every query, translated for PostgreSQL."""

    def __init__(self, target):
        self.target = without_password(target)  # the name in every message
        self.postgres = is_postgres(target)
        try:
            if self.postgres:
                import psycopg2  # Debian's python3-psycopg2; only needed for PostgreSQL
                try:
                    psycopg2.extensions.parse_dsn(target)
                except psycopg2.ProgrammingError:  # its message quotes pieces of the string, the password's too
                    raise DatabaseError("--db: not a PostgreSQL URL or connection string that libpq can read "
                                        "(not shown: it may hold a password)")
                self.connection = psycopg2.connect(target)
                self.connection.set_session(readonly=True)
            else:
                if not os.path.isfile(target):
                    raise DatabaseError(f"{target}: no such database file")
                uri = "file:" + urllib.parse.quote(os.path.abspath(target)) + "?mode=ro"
                self.connection = sqlite3.connect(uri, uri=True)
        except ImportError:
            raise DatabaseError(f"{self.target}: reading PostgreSQL needs python3-psycopg2 (apt-get install python3-psycopg2)")
        except DatabaseError:
            raise
        except Exception as e:  # sqlite3.Error, psycopg2.Error: both say what went wrong
            raise DatabaseError(f"{self.target}: cannot open: {without_password(' '.join(str(e).split()))}")

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

    def check_schema(self):
        """A database whose schema is newer than schema.sql's migrations is refused, as cpullm
        bench refuses it: its tables may mean what this code does not know."""
        with open(SCHEMA) as f:
            known = max(int(m) for m in re.findall(r"^-- migration (\d+):", f.read(), re.M))
        version = self.query("SELECT MAX(version) AS version FROM schema_version")[0]["version"]
        if version is not None and (not isinstance(version, int) or version > known):
            raise DatabaseError(f"{self.target}: schema version {version} is newer than this cpullm knows ({known}): "
                                "use a newer build")

    def column_types(self, table):
        """column -> the Python types its values may have. SQLite keeps whatever a writer put in
        a column (text in a REAL one); PostgreSQL's columns are typed, so no check there."""
        if self.postgres:
            return {}
        types = {}
        for column in self.query(f"PRAGMA table_info({table})"):
            declared = (column["type"] or "").upper()
            if "INT" in declared or any(word in declared for word in ("REAL", "FLOA", "DOUB")):
                types[column["name"]] = (int, float)
            elif any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
                types[column["name"]] = (str,)
        return types

    def checked(self, table, rows):
        """`rows` of `table`, each value of the type its column declares (or NULL): the sections
        compute with them."""
        types = self.column_types(table)
        for row in rows:
            for column, allowed in types.items():
                value = row.get(column)
                if value is not None and (isinstance(value, bool) or not isinstance(value, allowed)):
                    what = "a number" if allowed == (int, float) else "text"
                    where = f"row id {row['id']}" if "id" in row else f"a row of result {row.get('result_id')}"
                    raise DatabaseError(f"{self.target}: table {table}, column {column}, {where}: "
                                        f"{repr(value)[:60]} is not {what}")
        return rows

    def load(self, run_ids=None):
        """The runs (all, or those in run_ids) with their results, samples and regions."""
        self.check_schema()
        where, params = "", ()
        if run_ids:
            where = f" WHERE id IN ({', '.join('?' * len(run_ids))})"
            params = tuple(run_ids)
        contents = Contents()
        contents.runs = {r["id"]: r for r in self.checked("runs", self.query("SELECT * FROM runs" + where + " ORDER BY id", params))}
        missing = set(run_ids or ()) - set(contents.runs)
        if missing:
            raise DatabaseError(f"{self.target}: no run with id {', '.join(map(str, sorted(missing)))}")
        run_filter = where.replace(" id IN", " run_id IN")
        for row in self.checked("results", self.query("SELECT * FROM results" + run_filter + " ORDER BY id", params)):
            row["config"] = parse_json(row.get("config_json"))
            row["metrics"] = parse_json(row.get("metrics_json"))
            (contents.results if row.get("engine") in (None, "cpullm") else contents.peers).append(row)
        result_filter = f" WHERE result_id IN (SELECT id FROM results{run_filter})"
        samples = self.query("SELECT * FROM samples" + result_filter + " ORDER BY result_id, repetition", params)
        for row in self.checked("samples", samples):
            contents.samples.setdefault(row["result_id"], []).append(row)
        for row in self.checked("regions", self.query("SELECT * FROM regions" + result_filter, params)):
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
