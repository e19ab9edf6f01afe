"""End-to-end checks of `cpullm topo`.

The host's topology as text and JSON; the 4-socket E5-4627 v4 profile (emulated: said so, and
the plan for 40 threads under every binding policy and NUMA strategy); an hwloc XML file written
by lstopo; and bad input (unknown profile, CPUs that do not exist, malformed profiles) ending in
one 'cpullm: error:' line and exit status 1.
"""
import json
import os
import shutil

import pytest

import tuning
from cli_checks import expect_error, run


def topo_json(ctx, *args):
    return json.loads(run([ctx.cpullm, "topo", "--json", *args]).stdout)


def test_host_text(ctx):
    out = run([ctx.cpullm, "topo"]).stdout
    for fragment in ["topology: this machine (hwloc)", "packages:", "NUMA nodes:", "caches:", "isolated CPUs:",
                     "threads:", "placement: first-touch"]:
        assert fragment in out, f"{fragment!r} not in:\n{out}"
    assert "emulated" not in out


def test_host_json(ctx):
    data = topo_json(ctx, "--bind", "compact", "-t", "1")
    assert data["topology"]["emulated"] is False
    assert len(data["topology"]["cores"]) >= 1 and len(data["topology"]["nodes"]) >= 1
    slots = data["threads"]["slots"]
    assert len(slots) == 1 and slots[0]["cpu"] == data["threads"]["usable_cpus"][0], slots
    assert sum(data["placement"]["bytes_per_node"]) == data["placement"]["weight_bytes"]
    assert data["profile"] is None


def test_host_profile(ctx):
    data = topo_json(ctx, "--hardware", "host")
    assert data["profile"]["name"] == "host" and data["profile"]["topology"]["value"] == "detect"
    assert data["topology"]["emulated"] is False
    assert data["profile"]["tdp_watts_per_package"]["value"] is None
    assert data["profile"]["tdp_watts_per_package"]["source"].startswith("unknown")


def test_e5_scatter_shard(ctx):
    args = ["--hardware", "e5-4627v4", "-t", "40", "--bind", "scatter", "--numa", "shard"]
    out = run([ctx.cpullm, "topo", *args]).stdout
    assert "emulated: not this machine" in out and "never applied" in out, out[:400]
    assert "packages: 4, NUMA nodes: 4, cores: 40" in out
    assert "thread   1 -> CPU  10 (node 1, package 1)" in out
    data = topo_json(ctx, *args)
    assert data["topology"]["emulated"] is True and data["topology"]["packages"] == 4
    assert data["threads"]["per_node"] == [10, 10, 10, 10]
    assert [s["cpu"] for s in data["threads"]["slots"][:5]] == [0, 10, 20, 30, 1]
    placement = data["placement"]
    assert placement["strategy"] == "shard"
    assert sum(placement["bytes_per_node"]) == placement["weight_bytes"]
    q = next(s for s in placement["shards"] if s["name"] == "blk.0.attn_q.weight")
    assert [(r["node"], r["begin"], r["end"]) for r in q["ranges"]] == \
        [(0, 0, 1024), (1, 1024, 2048), (2, 2048, 3072), (3, 3072, 4096)], q
    assert data["profile"]["tdp_watts_per_package"]["value"] == 135


def test_e5_every_strategy(ctx):
    for strategy, copies in [("first-touch", 1), ("interleave", 1), ("replicate", 4), ("shard", 1)]:
        data = topo_json(ctx, "--hardware", "e5-4627v4", "--bind", "numa", "--numa", strategy)
        placement = data["placement"]
        assert placement["strategy"] == strategy
        assert sum(placement["bytes_per_node"]) == copies * placement["weight_bytes"], (strategy, placement)
        assert len(data["threads"]["slots"]) == 40


def test_cpuset_and_housekeeping(ctx):
    data = topo_json(ctx, "--hardware", "e5-4627v4", "--bind", "numa", "--cpuset", "2-31", "--housekeeping", "1")
    # Node 0 keeps 3-9 (2 goes to the OS), nodes 1 and 2 lose 10 and 20, node 3 keeps 31 of 30-31.
    assert data["threads"]["per_node"] == [7, 9, 9, 1], data["threads"]["per_node"]
    assert data["threads"]["slots"][0]["cpu"] == 3


def test_reductions_are_said(ctx):
    out = run([ctx.cpullm, "topo", "--synthetic", "pack:1 [numa(memory=1GiB)] core:4 pu:1", "--bind", "scatter",
               "--numa", "replicate"]).stdout
    assert "scatter over 1 package is compact" in out, out
    assert "one NUMA node: replicate is first-touch" in out, out
    assert "placement: first-touch (asked: replicate)" in out, out


def test_xml_topology(ctx):
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if not lstopo:
        pytest.skip("no lstopo to write an XML topology")
    xml = os.path.join(ctx.workdir, "two-nodes.xml")
    run([lstopo, "-i", "pack:2 [numa(memory=1GiB)] core:4 pu:1", "--of", "xml", "-f", xml])
    data = topo_json(ctx, "--xml", xml, "--bind", "numa", "--numa", "shard")
    assert data["topology"]["emulated"] is True and len(data["topology"]["nodes"]) == 2
    assert data["threads"]["per_node"] == [4, 4]


def test_model_file_sizes_the_placement(ctx):
    model = os.path.join(ctx.workdir, "small.gguf")
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "128", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--ctx", "64", "--dtype", "f16", "-o", model])
    info = json.loads(run([ctx.cpullm, "info", model, "--json"]).stdout)
    data = topo_json(ctx, "--hardware", "e5-4627v4", "-m", model, "--bind", "numa", "--numa", "interleave")
    assert data["placement"]["weight_bytes"] == info["totals"]["bytes"]
    assert data["placement"]["weights"] == model


def test_bad_input(ctx):
    topo = [ctx.cpullm, "topo"]
    expect_error(topo + ["--hardware", "no-such-box"], 'unknown hardware profile "no-such-box"', "e5-4627v4")
    expect_error(topo + ["--hardware", "e5-4627v4", "--bind", "compact", "--cpuset", "38-41"],
                 "CPU 40 does not exist on this topology (CPUs 0-39)")
    expect_error(topo + ["--cpuset", "3-x"], "not a CPU number")
    expect_error(topo + ["--cpuset", "9-2"], "runs backwards")
    expect_error(topo + ["--hardware", "e5-4627v4", "-t", "41", "--bind", "compact"], "41 threads but 40 usable")
    expect_error(topo + ["--hardware", "e5-4627v4", "--housekeeping", "10", "--bind", "numa"], "no usable core")
    expect_error(topo + ["--hardware", "e5-4627v4", "--numa", "shard"], "needs bound threads")
    expect_error(topo + ["--synthetic", "pack:x"], "invalid synthetic topology")
    good = open(os.path.join(ctx.profiles, "e5-4627v4.json"), encoding="utf-8").read()
    bad = os.path.join(ctx.workdir, "bad-profile.json")
    for broken, fragment in [(good.replace('"value": 135', '"value": "lots"'), 'field "tdp_watts_per_package"'),
                             (good.replace('"memory_speed_mts"', '"memory_speed"'), 'field "memory_speed_mts" is missing'),
                             (good[:200], "not valid JSON")]:
        with open(bad, "w", encoding="utf-8") as f:
            f.write(broken)
        expect_error(topo + ["--hardware", bad], bad, fragment)


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.profiles = os.path.join(os.path.dirname(os.path.abspath(tuning.__file__)), "profiles")
    return ctx
