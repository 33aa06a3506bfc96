"""Conformance expectations: one committed file per driver, vkep/expected/expected-<key>.json.

A driver is keyed by what it reports (`key_of`): its vendor id, its VkDriverId and its version. Mesa's
drivers report their Mesa version in `driverInfo` ("Mesa 22.3.6 (LLVM 15.0.6)"), and lavapipe's
`driverVersion` is 0.0.1 in every release, so for them the version is the one in `driverInfo`; elsewhere it
is `driverVersion` as the vendor encodes it. Debian's Mesa 22.3.6 lavapipe is thus
`expected-mesa-mesa_llvmpipe-22.3.6.json`.

A file holds, per switch and optimization level, the cases that passed when it was written
(`vkep conformance [--device all] --update-expectations`):
- `pass_vkep`, `pass_vkep_disable_all`: the default switch's cases that passed with every node on vkep, at
  ORT's default graph optimizations and with every optimization off;
- `switches`: {switch name: {"pass_vkep": [...], "pass": [...]}}, "pass" being the cases that passed with
  some node on another EP (with fp16=0, the float16 cases pass with their nodes on ORT's CPU EP).
A regression (`regressions`) is a case expected `pass_vkep` that is now anything else, or a case expected to
pass that now fails (wrong, error).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from vkep import resources

DIR = resources.EXPECTED_DIR
ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "vkep conformance --update-expectations"
PASSING = ("pass-vkep", "pass-partial", "pass-cpu")
MESA_VERSION = re.compile(r"^Mesa (\d+\.\d+\.\d+)")
NOTE = ("ONNX backend node test cases that passed on this driver when the file was written: with every node on "
        "VulkanExecutionProvider at ORT's default graph optimizations (pass_vkep) and with every optimization off "
        "(pass_vkep_disable_all); per feature switch (switches: pass_vkep, and pass = with some node on another EP). "
        "tests/test_conformance.py runs them and fails on a regression.")


def key_of(device: dict) -> dict:
    """What a driver reports, as the expectations key: vendor, VkDriverId and driver version (see above)."""
    mesa = MESA_VERSION.match(device.get("driver_info") or "")
    version = mesa.group(1) if mesa else device.get("driver_version")
    return {"vendor_id": device.get("vendor_id"), "vendor": device.get("vendor"), "driver_id": device.get("driver_id"),
            "driver_id_name": device.get("driver_id_name"), "driver_version": version}


def path_for(key: dict) -> Path:
    name = f"{key['vendor']}-{key['driver_id_name']}-{key['driver_version']}".lower()
    return DIR / f"expected-{re.sub(r'[^a-z0-9_.-]+', '_', name)}.json"


def default_device(devices: list[dict]) -> dict:
    """The device a plain `vkep conformance` run uses: the first usable GPU, else the first usable device
    (the EP options device=auto, allow_cpu_device=1)."""
    usable = [d for d in devices if d.get("usable", True) and "error" not in d]
    if not usable:
        raise RuntimeError(f"no usable Vulkan device: {devices}")
    return next((d for d in usable if d.get("type") != "cpu"), usable[0])


def this_driver_key() -> dict:
    from vkep.gpu.device import physical_devices

    return key_of(default_device([d.summary() for d in physical_devices()]))


def load(path: Path) -> dict | None:
    if not path.exists():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("key") and path_for(doc["key"]).name != path.name and path.parent == DIR:
        raise ValueError(f"{path}: its key {doc['key']} names another file ({path_for(doc['key']).name})")
    return doc


def list_key(optimization: str = "default") -> str:
    """The list of the default switch's all-on-vkep passes at one optimization level."""
    return "pass_vkep" if optimization == "default" else f"pass_vkep_{optimization}"


def expected(doc: dict, switch: str = "default", optimization: str = "default") -> tuple[set[str], set[str]] | None:
    """(cases expected all on vkep, cases expected to pass otherwise) for one switch, or None: not recorded."""
    if switch == "default":
        names = doc.get(list_key(optimization))
        return None if names is None else (set(names), set())
    entry = doc.get("switches", {}).get(switch)
    if entry is None or optimization != "default":
        return None
    return set(entry["pass_vkep"]), set(entry.get("pass", []))


def regressions(doc: dict, records: list[dict], switch: str = "default", optimization: str = "default") -> list[str]:
    """Each case of `records` that did worse than `doc` expects, as a line saying how."""
    want = expected(doc, switch, optimization)
    if want is None:
        return []
    all_on, passing = want
    out = []
    for r in records:
        if r["name"] in all_on and r["status"] != "pass-vkep":
            out.append(f"{r['name']}: {r['status']}, expected pass-vkep")
        elif r["name"] in passing and r["status"] not in PASSING:
            out.append(f"{r['name']}: {r['status']}, expected a pass")
        else:
            continue
        detail = r.get("message") or ("nodes " + str(r.get("nodes")) if r.get("nodes") else "")
        out[-1] += f" ({' '.join(detail.split())[:300]})" if detail else ""
    return out


def update(path: Path, device: dict, records: list[dict], versions: dict, manifest: list[str],
           switch: str = "default", optimization: str = "default", filtered: bool = False) -> tuple[int, int]:
    """Record one run's passes in the driver's file; with `filtered` (a run of part of the corpus) only the
    cases that ran are replaced. Returns (all-on-vkep cases before, after)."""
    old = load(path) or {}
    ran = {r["name"] for r in records}
    all_on = {r["name"] for r in records if r["status"] == "pass-vkep"}
    other = {r["name"] for r in records if r["status"] in ("pass-partial", "pass-cpu")}
    previous = expected(old, switch, optimization) or (set(), set())
    keep_on, keep_other = ((previous[0] - ran, previous[1] - ran) if filtered else (set(), set()))
    new_on, new_other = sorted(keep_on | all_on), sorted(keep_other | other)
    lists = {k: v for k, v in old.items() if k.startswith("pass_vkep")}
    found = dict(old.get("switches", {}))
    if switch == "default":
        lists[list_key(optimization)] = new_on  # (the default switch keeps its all-on-vkep passes only)
    else:
        if optimization != "default":
            raise ValueError("switch expectations are recorded at ORT's default optimizations")
        found[switch] = {"pass_vkep": new_on, "pass": new_other}
    out = {
        "key": key_of(device), "driver": device.get("driver"), "device": device.get("name"),
        "driver_info": device.get("driver_info"), "onnx": versions.get("onnx"),
        "onnxruntime": versions.get("onnxruntime"),
        "manifest": [os.path.relpath(p, ROOT) if p.startswith(str(ROOT)) else p for p in manifest],
        "regenerate": REGENERATE, "note": NOTE, **dict(sorted(lists.items())),
        "switches": dict(sorted(found.items())),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    return len(previous[0]), len(new_on)
