"""The small harness the CLI tests share: a list of named checks, a command runner, the
'cpullm: error:' expectation, and a runner that reports every check and ends with the
'N passed, N failed, N skipped' line. A check returns None (pass), a note (pass, printed) or a
string starting with 'skip'."""
import argparse
import os
import shutil
import subprocess

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def run(args, expect_ok=True, timeout=300):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def expect_error(args, *fragments):
    """The command must fail with status 1, its last line 'cpullm: error: ...' holding fragments."""
    proc = run(args, expect_ok=False)
    assert proc.returncode == 1, f"{args}: exit {proc.returncode} (stderr: {proc.stderr.strip()})"
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("cpullm: error: "), f"{args}: stderr {proc.stderr!r}"
    for fragment in fragments:
        assert fragment in last, f"{args}: {fragment!r} not in {last!r}"


def parse_context(description):
    """The arguments every CLI test takes, --cpullm and --workdir (emptied, then created): the
    namespace the checks get as their context."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpullm", required=True)
    ap.add_argument("--workdir", required=True)
    ctx = ap.parse_args()
    shutil.rmtree(ctx.workdir, ignore_errors=True)
    os.makedirs(ctx.workdir)
    return ctx


def write_tiny_model(cpullm, path, dtype="f32", context=512):
    """A 2-layer synthetic model (dim 64, 4 heads, 2 KV heads, vocabulary 1000): any command
    runs on it in well under a second."""
    run([cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "128", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--ctx", str(context), "--dtype", dtype, "-o", path])


def run_checks(ctx):
    """Runs every registered check with ctx; returns the exit status."""
    passed = failed = skipped = 0
    for fn in CHECKS:
        try:
            note = fn(ctx)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next check runs
            failed += 1
            print(f"FAIL {fn.__name__}: {e}")
            continue
        if isinstance(note, str) and note.startswith("skip"):
            skipped += 1
            print(f"SKIP {fn.__name__}: {note}")
        else:
            passed += 1
            print(f"PASS {fn.__name__}" + (f": {note}" if note else ""))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0
