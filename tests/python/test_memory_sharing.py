"""Weights are mapped, not copied: two processes running one model share its pages.

Generates a ~190 MB F32 synthetic model, then
  1. a process right after load is resident for far less than the file (it maps, it does not read);
  2. while two `cpullm generate` processes run it, each having touched every weight, the sum of
     their Pss (proportional set size, /proc/PID/smaps_rollup) stays under 1.3 times one
     process's Rss. Copying the weights would make it about 2.
"""
import os
import re
import subprocess
import time

import pytest


def smaps_kib(pid, field):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


@pytest.fixture(scope="module")
def two_processes(ctx):
    """Two `cpullm generate` runs of a ~190 MB F32 model: (file KiB, stderr's first line of the
    first, the processes), killed and the model removed afterwards."""
    model = os.path.join(ctx.workdir, "shared-pages.gguf")
    subprocess.run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "4", "--dim", "512", "--ffn", "1536",
                    "--heads", "8", "--vocab", "32000", "--dtype", "f32", "-o", model], check=True, capture_output=True)
    file_kib = os.path.getsize(model) // 1024
    command = [ctx.cpullm, "generate", "-m", model, "-c", "512", "-n", "500", "--ignore-eos", "-t", "1"]
    procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        yield file_kib, procs[0].stderr.readline(), procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
        os.remove(model)


def test_load_maps_rather_than_reads(two_processes):
    file_kib, load_line, _ = two_processes
    resident_after_load = float(re.search(r"([\d.]+) MiB resident after load", load_line).group(1)) * 1024
    print(f"file {file_kib} KiB; resident right after load {resident_after_load:.0f} KiB")
    assert resident_after_load < 0.25 * file_kib


def test_two_processes_share_the_weights(two_processes):
    file_kib, _, procs = two_processes
    # Wait until both have run a token or two: every weight page touched.
    deadline = time.time() + 120
    while not (all(p.poll() is None for p in procs) and all(smaps_kib(p.pid, "Rss") > 0.95 * file_kib for p in procs)):
        assert time.time() < deadline, "the processes never became resident for the whole model"
        time.sleep(0.2)
    rss = [smaps_kib(p.pid, "Rss") for p in procs]
    pss = [smaps_kib(p.pid, "Pss") for p in procs]
    ratio = sum(pss) / max(rss)
    print(f"Rss {rss} KiB, Pss {pss} KiB: Pss sum / one Rss = {ratio:.3f} (limit 1.3)")
    assert ratio < 1.3
