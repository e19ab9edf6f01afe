"""What the CLI tests share: a command runner, the 'cpullm: error:' expectation, a tiny model."""
import subprocess


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


def write_tiny_model(cpullm, path, dtype="f32", context=512):
    """A 2-layer synthetic model (dim 64, 4 heads, 2 KV heads, vocabulary 1000): any command
    runs on it in well under a second."""
    run([cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "128", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--ctx", str(context), "--dtype", dtype, "-o", path])

