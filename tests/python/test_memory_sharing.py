#!/usr/bin/python3
"""Weights are mapped, not copied: two processes running one model share its pages.

Generates a ~190 MB F32 synthetic model, then
  1. a process right after load is resident for far less than the file (it maps, it does not read);
  2. while two `cpullm generate` processes run it, each having touched every weight, the sum of
     their Pss (proportional set size, /proc/PID/smaps_rollup) stays under 1.3 times one
     process's Rss. Copying the weights would make it about 2.

Usage: test_memory_sharing.py --cpullm BIN --workdir DIR
"""
import argparse
import os
import re
import subprocess
import sys
import time


def smaps_kib(pid, field):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpullm", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    model = os.path.join(args.workdir, "shared-pages.gguf")
    subprocess.run([args.cpullm, "gen-model", "--shape", "custom", "--layers", "4", "--dim", "512", "--ffn", "1536",
                    "--heads", "8", "--vocab", "32000", "--dtype", "f32", "-o", model], check=True, capture_output=True)
    file_kib = os.path.getsize(model) // 1024

    command = [args.cpullm, "generate", "-m", model, "-c", "512", "-n", "500", "--ignore-eos", "-t", "1"]
    procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        load_line = procs[0].stderr.readline()
        resident_after_load = float(re.search(r"([\d.]+) MiB resident after load", load_line).group(1)) * 1024
        print(f"file {file_kib} KiB; resident right after load {resident_after_load:.0f} KiB")
        ok = resident_after_load < 0.25 * file_kib

        # Wait until both have run a token or two: every weight page touched.
        deadline = time.time() + 120
        while time.time() < deadline:
            if all(p.poll() is None for p in procs) and all(smaps_kib(p.pid, "Rss") > 0.95 * file_kib for p in procs):
                break
            time.sleep(0.2)
        else:
            print("FAIL: the processes never became resident for the whole model")
            return 1
        rss = [smaps_kib(p.pid, "Rss") for p in procs]
        pss = [smaps_kib(p.pid, "Pss") for p in procs]
        ratio = sum(pss) / max(rss)
        print(f"Rss {rss} KiB, Pss {pss} KiB: Pss sum / one Rss = {ratio:.3f} (limit 1.3)")
        ok = ok and ratio < 1.3
    finally:
        for p in procs:
            p.kill()
            p.wait()
        os.remove(model)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
