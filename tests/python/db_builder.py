"""Test databases written the one way cpullm's results database is written: `cpullm db import`.
Runs are numbered 1, 2, ... in the order they are added, as a new database numbers them."""
import json
import os
import subprocess


class Runs:
    def __init__(self):
        self.documents = []  # {"run": runs fields, "results": [results fields with samples and regions]}

    def add_run(self, **run):
        """A run with these fields of `runs` (host fields not given are this host's); returns its id."""
        self.documents.append({"run": run, "results": []})
        return len(self.documents)

    def add_result(self, run_id, samples=(), regions=(), **fields):
        """A point of run `run_id`: fields of `results`, samples and regions as lists of dicts."""
        self.documents[run_id - 1]["results"].append(dict(fields, samples=list(samples), regions=list(regions)))

    def write(self, cpullm, path):
        """A new database at `path` (a file there is replaced) holding these runs."""
        if os.path.exists(path):
            os.remove(path)
        proc = subprocess.run([cpullm, "db", "--db", path, "import", "-"], input=json.dumps(self.documents),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
