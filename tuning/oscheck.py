"""The OS checklist of `cpullm tune` on the machine itself: each setting's current value, the
profile's recommended one, why, and the exact command that fixes it. Reads /proc and /sys under
`root` (a fake tree in the tests). A setting the OS does not expose (no cpufreq in a VM, no SMT
control) is reported as unavailable, never guessed."""
import ctypes
import ctypes.util
import glob
import mmap
import os
import re
from dataclasses import dataclass

from .space import parse_cpu_list


@dataclass
class Check:
    name: str
    current: str
    recommended: str
    why: str
    fix: str  # empty when nothing needs doing
    status: str  # "ok", "change" or "unavailable"


def read(root, path):
    """The file's stripped text, or None where it does not exist."""
    try:
        with open(os.path.join(root, path.lstrip("/"))) as f:
            return f.read().strip()
    except OSError:
        return None


def format_cpus(cpus):
    """[0, 1, 2, 5] -> "0-2,5": the kernel's list syntax."""
    cpus, parts, i = sorted(set(cpus)), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def isolated_set(topology, housekeeping):
    """Every PU of every core but the lowest `housekeeping` cores of each NUMA node."""
    per_node = {}
    for core in topology["cores"]:
        per_node.setdefault(core["node"], []).append(core)
    return sorted(p for cores in per_node.values()
                  for core in sorted(cores, key=lambda c: c["pus"][0])[housekeeping:] for p in core["pus"])


def cmdline_cpus(cmdline, key):
    """The CPU list of `key=` on the kernel command line (isolcpus may carry flags first:
    isolcpus=domain,managed_irq,2-31), or None when absent."""
    match = re.search(rf"(?:^|\s){key}=(\S+)", cmdline)
    if not match:
        return None
    return parse_cpu_list(",".join(p for p in match.group(1).split(",") if p[:1].isdigit()))


def kernel_cmdline(topology, housekeeping, smt_off, thp):
    """The kernel command line additions for the box: isolation for the inference cores, THP, SMT."""
    cpus = format_cpus(isolated_set(topology, housekeeping))
    extra = [f"isolcpus={cpus}", f"nohz_full={cpus}", f"rcu_nocbs={cpus}"] if cpus else []
    return extra + [f"transparent_hugepage={thp}"] + (["nosmt"] if smt_off else [])


def check_isolation(root, topology, housekeeping, why):
    want = isolated_set(topology, housekeeping)
    cmdline = read(root, "/proc/cmdline") or ""
    have = {key: cmdline_cpus(cmdline, key) for key in ("isolcpus", "nohz_full", "rcu_nocbs")}
    current = "; ".join(f"{k}={format_cpus(v) if v is not None else '(unset)'}" for k, v in have.items())
    if not want:
        return Check("isolation", current, f"nothing to isolate: {housekeeping} housekeeping core(s) per node leave no core",
                     why, "", "ok")
    target = format_cpus(want)
    ok = all(v is not None and sorted(v) == want for v in have.values())
    fix = ("" if ok else f"add 'isolcpus={target} nohz_full={target} rcu_nocbs={target}' to GRUB_CMDLINE_LINUX in "
           "/etc/default/grub, run update-grub, reboot")
    return Check("isolation", current, f"isolcpus=nohz_full=rcu_nocbs={target} ({housekeeping} housekeeping core(s) per node)",
                 why, fix, "ok" if ok else "change")


def check_value(name, current, recommended, why, fix):
    """A setting with one current value; "any" or "n/a" recommended means nothing to check."""
    if current is None:
        return Check(name, "unavailable (not exposed here)", recommended, why, "", "unavailable")
    ok = recommended in ("any", "n/a") or current == recommended
    return Check(name, current, recommended, why, "" if ok else fix, "ok" if ok else "change")


def bracketed(text):
    """"always [madvise] never" -> "madvise"."""
    match = re.search(r"\[(\w+)\]", text or "")
    return match.group(1) if match else None


def governors(root):
    """The scaling governors in use, e.g. "performance" or "powersave x2, performance x6"."""
    files = sorted(glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")))
    if not files:
        return None
    values = []
    for path in files:
        with open(path) as f:
            values.append(f.read().strip())
    distinct = sorted(set(values))
    return distinct[0] if len(distinct) == 1 else ", ".join(f"{g} x{values.count(g)}" for g in distinct)


def boost(root):
    """on/off from acpi-cpufreq's boost or intel_pstate's no_turbo; None where neither exists."""
    value = read(root, "/sys/devices/system/cpu/cpufreq/boost")
    if value is not None:
        return "on" if value == "1" else "off"
    value = read(root, "/sys/devices/system/cpu/intel_pstate/no_turbo")
    if value is not None:
        return "off" if value == "1" else "on"
    return None


def node_memory(root):
    """{node: (total bytes, free bytes)} from /sys/devices/system/node/node*/meminfo."""
    nodes = {}
    for path in sorted(glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*/meminfo"))):
        with open(path) as f:
            text = f.read()
        fields = {m.group(1): int(m.group(2)) * 1024 for m in re.finditer(r"Node \d+ (\w+):\s+(\d+) kB", text)}
        nodes[int(re.search(r"node(\d+)/meminfo", path).group(1))] = (fields.get("MemTotal", 0), fields.get("MemFree", 0))
    return nodes


def check_memory(root, model_bytes):
    nodes = node_memory(root)
    why = "weights read from a node without the memory to hold them spill to other nodes (remote reads) or swap"
    if not nodes:
        return Check("memory per node", "unavailable (no /sys/devices/system/node)", "balanced nodes", why, "", "unavailable")
    gib = 1 << 30
    current = ", ".join(f"node {n}: {t / gib:.1f} GiB, {f / gib:.1f} GiB free" for n, (t, f) in nodes.items())
    totals = [t for t, _ in nodes.values()]
    balanced = min(totals) >= 0.9 * max(totals)
    fits = model_bytes <= sum(f for _, f in nodes.values())
    fix = []
    if not balanced:
        fix.append("populate every node's memory channels alike (the same DIMMs per node)")
    if not fits:
        fix.append(f"free memory for the {model_bytes / gib:.1f} GiB model (sync; echo 3 > /proc/sys/vm/drop_caches "
                   "drops clean page cache) or choose a smaller format")
    return Check("memory per node", current, f"nodes within 10% of each other; {model_bytes / gib:.1f} GiB of weights fit free memory",
                 why, "; ".join(fix), "ok" if not fix else "change")


def resident_fraction(path):
    """The share of the file's pages in the page cache, by mincore(2) over a read-only mapping
    (nothing is read: mapping a file touches no page)."""
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"{path}: mmap failed")
        vector = ctypes.create_string_buffer(pages)
        try:
            if libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), f"{path}: mincore failed")
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vector.raw) / pages


def check_residency(model):
    fraction = resident_fraction(model)
    return Check("model page-cache residency", f"{fraction:.0%} of {model} resident", "100% before timing",
                 "a cold page cache makes the first runs read from disk: time to first token then measures the disk",
                 "" if fraction >= 0.99 else f"cat {model} > /dev/null   (or vmtouch -t {model})",
                 "ok" if fraction >= 0.99 else "change")


def checklist(root, topology, recommendations, model, model_bytes):
    """Every check, in the issue's order. recommendations: the profile's list of
    {"setting", "value", "why"}; a setting it does not name is recommended as 'any'."""
    rec = {r["setting"]: r for r in recommendations}

    def want(setting):
        r = rec.get(setting, {"value": "any", "why": "the profile does not say"})
        return r["value"], r["why"]

    housekeeping, why = want("isolation")
    checks = [check_isolation(root, topology, int(housekeeping) if housekeeping.isdigit() else 1, why)]
    value, why = want("vm.swappiness")
    checks.append(check_value("vm.swappiness", read(root, "/proc/sys/vm/swappiness"), value, why,
                              f"sysctl -w vm.swappiness={value}; echo vm.swappiness={value} > /etc/sysctl.d/90-cpullm.conf"))
    value, why = want("transparent_hugepage")
    checks.append(check_value("transparent hugepages", bracketed(read(root, "/sys/kernel/mm/transparent_hugepage/enabled")),
                              value, why, f"echo {value} > /sys/kernel/mm/transparent_hugepage/enabled "
                                          f"(persist: transparent_hugepage={value} on the kernel command line)"))
    value, why = want("smt")
    smt = read(root, "/sys/devices/system/cpu/smt/control")
    if smt in ("notsupported", "notimplemented"):  # no sibling threads: nothing to switch off
        value, why = "n/a", f"the CPU has no SMT ({smt})"
    checks.append(check_value("SMT", {"forceoff": "off"}.get(smt, smt), value, why,
                              f"echo {value} > /sys/devices/system/cpu/smt/control (persist: nosmt on the kernel command line)"))
    value, why = want("governor")
    checks.append(check_value("CPU frequency governor", governors(root), value, why,
                              f"cpupower frequency-set -g {value}"))
    value, why = want("boost")
    checks.append(check_value("boost (turbo)", boost(root), value, why,
                              f"echo {1 if value == 'on' else 0} > /sys/devices/system/cpu/cpufreq/boost "
                              f"(intel_pstate: echo {0 if value == 'on' else 1} > /sys/devices/system/cpu/intel_pstate/no_turbo)"))
    value, why = want("numa_balancing")
    checks.append(check_value("NUMA balancing", read(root, "/proc/sys/kernel/numa_balancing"), value, why,
                              f"sysctl -w kernel.numa_balancing={value}; echo kernel.numa_balancing={value} >> "
                              "/etc/sysctl.d/90-cpullm.conf"))
    checks.append(check_memory(root, model_bytes))
    checks.append(check_residency(model))
    return checks


def print_checklist(checks, out):
    for c in checks:
        print(f"  [{c.status:^11}] {c.name}: now {c.current}; recommended {c.recommended}", file=out)
        print(f"                why: {c.why}", file=out)
        if c.fix:
            print(f"                fix: {c.fix}", file=out)
