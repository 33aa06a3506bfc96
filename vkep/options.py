"""Every setting vkep reads, declared once: name, parser, default, meaning, scope.

- **Per session** settings are EP options, given as `add_provider_for_devices(devices, {name: value})`. ORT
  keeps them in the session config as `ep.vulkanexecutionprovider.<name>`; vkep publishes each with its
  default in every OrtEpDevice's `ep_options`, and validates them all when a session is created
  (`parse_session`): an unknown name or a bad value fails session creation with a message naming it.
- **Process-wide** settings (what one VkInstance, one logical device per physical device, or ORT's view of
  a device fixed at registration serves for every session) are environment variables, read through `env`.

Both kinds go through the same parsers. The README's two tables are rendered from this module
(`python -m vkep.options`) and tests/test_options.py checks that they match. Nothing here imports the
rest of vkep, so every layer can use it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION = "session"
PROCESS = "process"


class OptionError(ValueError):
    """A setting with a value vkep does not accept, or an EP option vkep does not know."""


@dataclass(frozen=True)
class Parser:
    """Turns the text of a setting into its value; `accepted` says what it takes, for messages."""

    accepted: str
    parse: Callable[[str], Any]


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _flag(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError


def _choice(*values: str) -> Parser:
    def parse(text: str) -> str:
        if text.strip().lower() not in values:
            raise ValueError
        return text.strip().lower()

    return Parser(" or ".join(repr(v) for v in values), parse)


def _switch(text: str) -> bool | None:
    """auto → None (decided per device), else a flag."""
    return None if text.strip().lower() == "auto" else _flag(text)


def _megabytes(text: str) -> int:
    value = float(text)
    if not value >= 0 or value == float("inf"):  # also rejects NaN
        raise ValueError
    return int(value * (1 << 20))


def _seconds(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    value = float(text)
    if not 0 < value < float("inf"):  # also rejects NaN
        raise ValueError
    return value


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip()


def _paths(text: str) -> list[Path]:
    return [Path(p) for p in text.split(os.pathsep) if p]


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError
    return value


FLAG = Parser("1, 0, true, false, yes, no, on or off", _flag)
SWITCH = Parser("'auto', or 1, 0, true, false, yes, no, on or off", _switch)
COUNT = Parser("an integer >= 1", _count)
MEGABYTES = Parser("a number of MiB >= 0 (0: no cap)", _megabytes)
SECONDS = Parser("a number of seconds above 0, or 'none'", _seconds)
TEXT = Parser("a non-empty string", _text)
PATH = Parser("a path", lambda text: Path(text).expanduser())
PATHS = Parser(f"paths separated by {os.pathsep!r}", _paths)


@dataclass(frozen=True)
class Setting:
    name: str
    parser: Parser
    default: str  # as a user writes it; "" for an environment variable means "unset"
    meaning: str  # README's "Meaning" column (markdown)
    scope: str  # SESSION (an EP option) or PROCESS (an environment variable)
    shown_default: str = ""  # README's "Default" column when it is not `default` itself
    # a feature switch: the value that turns an optional device feature off (the conformance matrix runs
    # every switch at this value: vkep.conformance.matrix); "" for other settings
    switch_off: str = ""

    def parse(self, text: str) -> Any:
        try:
            return self.parser.parse(text)
        except (ValueError, TypeError):
            where = f"EP option {self.name}" if self.scope == SESSION else self.name
            raise OptionError(f"vkep: {where}={text!r} is not valid: expected {self.parser.accepted}") from None

    @property
    def default_cell(self) -> str:
        return self.shown_default or f"`{self.default}`"


# Per-session settings: EP options. (Room for more: one entry each.)
EP_OPTIONS = [
    Setting("device", TEXT, "auto",
            "Which of the session's Vulkan devices vkep runs on: its index in `vkep devices`, a substring of its "
            "name, or its UUID (`vulkan.device_uuid` in the OrtEpDevice's metadata). `auto`: the first GPU among "
            "the devices given to the session; a CPU-implemented device (lavapipe, SwiftShader) only with "
            "`allow_cpu_device=1`. Naming a device asks for it, whatever its type", SESSION),
    Setting("allow_cpu_device", FLAG, "0",
            "`1` lets `device=auto` use a CPU-implemented Vulkan device (lavapipe, SwiftShader) when the session "
            "has no GPU. Off by default: ORT's CPU EP is 5-70x faster there, and ORT's automatic selection "
            "(`set_provider_selection_policy`) always offers such a device to vkep (see \"Automatic device "
            "selection\"), so vkep claims no node on one unless asked", SESSION),
    Setting("prepack_cache", _choice("vkep", "ort"), "vkep",
            "`vkep`: packed weights in vkep's content-keyed cache, shared by every session of the process; "
            "`ort`: in ORT's shared pre-packed weight cache", SESSION),
    Setting("memory_budget_mb", MEGABYTES, "0",
            "Cap, in MiB, on the memory vkep reserves on the session's device (beyond it, allocations fail "
            "cleanly). The device is shared by the process's sessions: the smallest budget of its live sessions "
            "applies. `0`: no cap", SESSION),
    Setting("fp16", SWITCH, "auto",
            "float16 kernels. `auto`: where the device has 16-bit storage (`vkep devices`, fp16 column); `0`: "
            "float16 nodes stay on other EPs; `1`: as auto, but session creation fails on a device without "
            "16-bit storage", SESSION, switch_off="0"),
    Setting("int8", SWITCH, "auto",
            "8-bit kernels (uint8, int8, bool: 8-bit storage and `shaderInt8`). `auto`: where the device has both; "
            "`0`: those nodes stay on other EPs; `1`: as auto, but session creation fails on a device without them",
            SESSION, switch_off="0"),
    Setting("subgroups", SWITCH, "auto",
            "subgroup operations (`subgroupBroadcast` in compute shaders: MatMul's pair loads, MatMulNBits' lane "
            "mode, Winograd convolutions). `auto`: where the device has them; `0`: kernels take their variants "
            "without subgroup operations; `1`: as auto, but session creation fails on a device without them",
            SESSION, switch_off="0"),
    Setting("coopmat", SWITCH, "auto",
            "cooperative matrices (VK_KHR_cooperative_matrix: the device's matrix units) for float16 MatMul, Gemm and "
            "Conv (shaders/matmul_coop.comp). `auto`: where the device lists a float16 product with float32 sums and "
            "vkep/kernels/tuning.json does not measure them slower; `0`: the tiled GEMM and conv.comp instead; `1`: as auto, but session creation fails on a device without them",
            SESSION, switch_off="0"),
    Setting("host_import", SWITCH, "auto",
            "host memory the device reads and writes in place (`VK_EXT_external_memory_host`: host tensors ORT "
            "hands over, CPU-EP outputs). `auto`: where the device has the extension; `0`: this session copies "
            "such tensors through staging memory, as on a device without it; `1`: as auto, but session creation "
            "fails on a device without it", SESSION, switch_off="0"),
    Setting("epilogues", SWITCH, "auto",
            "with `fuse=1`: a Conv, MatMul or Gemm also takes the elementwise group it feeds into its own last "
            "dispatch (ORT's Compile; docs/design.md, \"Fused elementwise groups\"). `auto`: where "
            "`vkep/kernels/tuning.json` does not say it costs more than it gives on the device's class (on "
            "lavapipe it does: each producer compiles again per group program, seconds of cold start for a few "
            "percent a run); `1`: wherever a group fits; `0`: never", SESSION),
    Setting("wait_limit_s", SECONDS, "none",
            "seconds any one wait for the device may take before the run fails with an error naming the node (the "
            "session stays usable); waits go in 100 ms slices, so without it slow work (a cold driver compiling "
            "shaders) is never a failure; host memory the run lent the device is still waited for; it limits the "
            "waits inside vkep's nodes (on a discrete GPU the run's last wait is ORT's stream synchronisation, "
            "which it does not limit)", SESSION),
    Setting("fuse", FLAG, "1",
            "`1`: groups of float elementwise nodes (unary activations and math, Add/Sub/Mul/Div/Pow/Min/Max/PRelu, "
            "Clip), where each feeds only the next, become one node through ORT's Compile and run in one dispatch "
            "(ORT's placement record still lists each node on vkep); `0`: one kernel per node. docs/design.md, "
            "\"Fused elementwise groups\"", SESSION),
    Setting("qdq", FLAG, "1",
            "`1`: each DequantizeLinear -> Conv / MatMul / Gemm / Add / Mul / pool / Sigmoid / LeakyRelu / Softmax / "
            "Concat -> QuantizeLinear group that ORT's CPU EP would fuse into a QLinear kernel becomes one node "
            "through ORT's Compile and runs vkep's QLinear kernel, computing in integers as the CPU EP does; `0`: "
            "the nodes one by one, in float. docs/design.md, \"QDQ groups: computed as the CPU EP computes them\"", SESSION),
    Setting("cpu_fusions", FLAG, "1",
            "`1`: node groups that ORT's CPU EP fuses into one kernel at ORT's default level (the Erf form of Gelu, "
            "LayerNormalization and SimplifiedLayerNormalization written out in nodes, Add -> LayerNormalization into "
            "SkipLayerNormalization, MatMul with scalar Muls or Divs into FusedMatMul) become one node through ORT's Compile and run vkep's kernel of the fused op, "
            "computing as the CPU EP does; `0`: the nodes one by one. docs/design.md, \"ORT's CPU fusions, "
            "followed\"", SESSION),
    Setting("enable_graph_capture", FLAG, "0",
            "`1`: the session's device work is recorded once and every later run is one submit of the recorded "
            "command buffers, whatever the node count. ORT then needs every node on vkep and no control flow. "
            "Bind every input and output with IOBinding to an OrtValue in vkep memory "
            "(`OrtValue.ortvalue_from_shape_and_type(..., memory_info=ep_device.memory_info(...))`) and refill "
            "the same buffers in place, as with CUDA graphs; a capture over host arrays fails with an error "
            "saying so. Values the host reads (shapes, Reshape targets) are those of the captured run; a run "
            "config entry `gpu_graph_id` captures one graph per id (`-1`: run the nodes). docs/design.md, "
            "\"Graph capture\"", SESSION),
    Setting("fp16_accumulation", _choice("float32", "float16"), "float32",
            "the type float16 MatMul, Gemm and Conv multiply and sum in (matmul.comp, conv.comp; docs/design.md, "
            "\"float16 arithmetic\"). `float32`: products and sums in float, rounded to float16 once at the end; "
            "`float16`: multiply-adds in float16, as a GPU's packed half units run them: each step of the sum "
            "rounds, so results drift from the CPU EP's (relative error up to about K x 2^-11 over K terms). "
            "Cooperative-matrix products keep their float32 sums. No gain on lavapipe, which widens float16 to float "
            "and rounds back at every step (measured, MatMul 512^3: 1.00-1.06x the time on Mesa 22.3, 1.2-1.5x on "
            "Mesa 25)", SESSION),
]

# Process-wide settings: environment variables.
ENV_VARS = [
    Setting("VKEP_VALIDATION", FLAG, "0", "`1` enables the Vulkan validation layer (the tests set it)", PROCESS,
            "off"),
    Setting("VKEP_CACHE_DIR", PATH, "", "where SPIR-V compiled at run time and the pipeline cache live", PROCESS,
            "`$XDG_CACHE_HOME/vkep`, else `~/.cache/vkep`"),
    Setting("XDG_CACHE_HOME", PATH, "", "the base of per-user caches (XDG): vkep's is its `vkep` directory, the "
            "only place vkep writes to", PROCESS, "`~/.cache`"),
    Setting("VKEP_MANIFEST", PATHS, "", "the kernel manifest(s) to load (later files add kernels)", PROCESS,
            "`kernels.yaml` in the package"),
    Setting("VKEP_SHADER_DIR", PATH, "", "where shaders are compiled from (a kernel author's copy; `vkep dev --shader-dir` "
            "sets it for its process)", PROCESS, "`shaders/` in the package"),
    Setting("VKEP_FORCE_DISCRETE", FLAG, "0",
            "`1` runs a unified-memory device the way a discrete GPU is run (staging copies, no host access to "
            "device memory): tests that path anywhere. Process-wide: ORT reads a device's memory kinds from its "
            "OrtEpDevice once, at registration, and every session shares the device's memory pools", PROCESS,
            "off", switch_off="1"),
    Setting("VKEP_DEFAULT_MEMORY", _choice("host_accessible", "default"), "host_accessible",
            "the EP's default memory on a unified device: `host_accessible` (declared to ORT as host memory: no "
            "copies at graph inputs, outputs and CPU-EP boundaries) or `default` (device memory with ORT's Memcpy "
            "nodes: one host copy per transfer). Process-wide for the same reason as `VKEP_FORCE_DISCRETE`",
            PROCESS),
    Setting("VKEP_CPU_EP_THREADS", COUNT, "",
            "the intra-op thread count of the CPU EP sessions whose answers vkep reproduces where they depend on it: "
            "ORT's CPU EP quantizes a DynamicQuantizeLSTM's hidden state over groups of batch rows, one a thread "
            "(docs/design.md, \"com.microsoft DynamicQuantizeLSTM\"), and MLAS shares a float32 product's rows or "
            "columns among its threads, each share summed in its own K blocks (docs/design.md, \"MLAS's SGEMM, "
            "Softmax and Eigen's sums, followed\"). Set it to the `intra_op_num_threads` of the CPU EP session vkep "
            "is compared with", PROCESS, "ORT's default: the host's physical cores"),
    Setting("VKEP_DEBUG_HAZARDS", FLAG, "0",
            "`1` checks every host access to vkep memory against recorded GPU work that has not completed, and "
            "fails on a conflict (native replay off; slow: for debugging, see docs/design.md)", PROCESS, "off"),
    Setting("VKEP_MAX_WORKGROUP_COUNT", COUNT, "",
            "a lower cap on the workgroups of one dispatch in each dimension than the device's "
            "maxComputeWorkGroupCount: wider grids are recorded as several dispatches (docs/design.md, \"Threads, "
            "limits and numbers at the edges\"); for testing that split cheaply. A dispatch past it of a shader that "
            "cannot be split (Transpose, Concat, Where, a Winograd conv, ...: the design doc lists them) fails the run", PROCESS, "the device's"),
    Setting("VKEP_TRACE_CALLBACKS", FLAG, "0",
            "`1` writes the name of every ORT callback vkep enters to stderr (debugging the plugin ABI)",
            PROCESS, "off"),
]

SETTINGS: dict[str, Setting] = {s.name: s for s in EP_OPTIONS + ENV_VARS}
EP_OPTION_NAMES = [s.name for s in EP_OPTIONS]
# the settings that turn an optional device feature off, EP options first (vkep.conformance.matrix runs each)
FEATURE_SWITCHES = [s for s in EP_OPTIONS + ENV_VARS if s.switch_off]


def env(name: str) -> Any:
    """The parsed value of a process-wide setting (its default when unset or empty)."""
    setting = SETTINGS[name]
    assert setting.scope == PROCESS, name
    text = os.environ.get(name, "")
    if not text.strip():
        return setting.parse(setting.default) if setting.default else None
    return setting.parse(text)


def raw_environment(names) -> dict[str, str]:
    """The variables among `names` that are set, as text (for a report that shows the environment it ran in:
    vkep's settings and the Vulkan loader's or driver's own variables)."""
    return {name: os.environ[name] for name in names if name in os.environ}


# the options that choose the device: not published (ORT writes an OrtEpDevice's `ep_options` into the session
# config before the application's, and logs "Config with key [...] already exists ... It will be overwritten" for
# each one given again: every session on lavapipe gives allow_cpu_device=1, `vkep run`'s too)
SELECTION_OPTIONS = ("device", "allow_cpu_device")


def ep_option_defaults() -> dict[str, str]:
    """What every OrtEpDevice publishes as its `ep_options`: each EP option with its default, but those that choose
    the device (SELECTION_OPTIONS)."""
    return {s.name: s.default for s in EP_OPTIONS if s.name not in SELECTION_OPTIONS}


def parse_session(given: dict[str, str]) -> dict[str, Any]:
    """Every EP option of a session, parsed (defaults for those not given). `given` maps option names to
    text; a name vkep does not know is an error naming the ones it does."""
    for name in given:
        if name not in SETTINGS or SETTINGS[name].scope != SESSION:
            raise OptionError(f"vkep: unknown EP option {name!r}; vkep's EP options are: "
                              + ", ".join(EP_OPTION_NAMES) + " (README: EP options)")
    return {s.name: s.parse(given.get(s.name, s.default)) for s in EP_OPTIONS}


def markdown_table(scope: str) -> str:
    """The README table of one scope, rendered from the declarations above."""
    head = "| Option | Meaning | Default |" if scope == SESSION else "| Variable | Meaning | Default |"
    rows = [head, "|---|---|---|"]
    rows += [f"| `{s.name}` | {s.meaning} | {s.default_cell} |" for s in EP_OPTIONS + ENV_VARS if s.scope == scope]
    return "\n".join(rows)


def main() -> int:
    sys.stdout.write("EP options:\n\n" + markdown_table(SESSION) + "\n\nEnvironment variables:\n\n"
                     + markdown_table(PROCESS) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
