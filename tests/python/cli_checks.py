"""The small harness the CLI tests share: a list of named checks, a command runner, the
'cpullm: error:' expectation, and a runner that reports every check and ends with the
'N passed, N failed, N skipped' line. A check returns None (pass), a note (pass, printed) or a
string starting with 'skip'."""
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
