"""``profile()``: run a model through prefill and decode under the profiler.

Per run: one prefill step over the prompt, then ``new_tokens - 1`` decode
steps that each feed the greedy token back through the KV cache. ``warmup``
runs go first, unrecorded; then the same run is timed without the profiler
(for the capture overhead), then ``runs`` runs are recorded into one trace,
each inside ``taxbreak/run/<r>`` with every step in ``taxbreak/<phase>/<i>``.

``torch.profiler`` records CPU activity (and CUDA when the model is on a GPU)
with ``record_shapes=True`` (the isolation replay rebuilds ops from shapes) and
``with_stack=True``: torch 2.13's Python tracer then writes a
``python_function`` event for every Python call, so each top-level ATen op
sits inside the builtin call that issued it (``<built-in function linear>``)
and the ``nn.Module: <Name>_<k>`` frame of its module. That enclosing frame
is what the decomposer's T_py (ts(aten) - ts(torch op)) is measured from.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from ..readers.nsys import export_timeout_s
from ..trace.errors import CaptureError, UsageError
from ..trace.fileio import atomic_output, output_target, write_output
from ..trace.progress import ProgressEvent  # stages build/warmup/baseline/record/export/analyze
from . import manifest as mf
from . import markers
from .kineto_log import profiler_session
from .hostinfo import free_memory_bytes
from .models import build_model, count_parameters, parse_dtype, resolve_spec

log = logging.getLogger(__name__)

DEFAULT_MODEL = "llama-3.2-1b"
BACKENDS = ("torch", "nsys")


@dataclass
class ProfileConfig:
    """What to run. ``None`` fields take device-dependent defaults (:meth:`resolved`)."""

    model: str | None = None  # preset, "<preset>-tiny" or "hf:PATH"; None = llama-3.2-1b
    batch_size: int = 1
    seq_len: int = 128
    new_tokens: int = 10  # per sequence per run: 1 prefill + (new_tokens - 1) decode steps
    warmup: int = 2
    runs: int = 3
    layers: int | None = None
    hidden: int | None = None
    experts: int | None = None
    dtype: str | None = None  # None: bfloat16 on CUDA, float32 on CPU
    device: str | None = None  # None: cuda if available, else cpu
    tiny: bool | None = None  # None: tiny on CPU, full size on CUDA
    backend: str = "torch"
    seed: int = 0
    threads: int | None = None  # torch intra-op threads; None: 1 on CPU, torch's default on CUDA
    overhead_reps: int = 5
    with_stack: bool = True
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))

    def resolved(self) -> "ProfileConfig":
        """Fill the device-dependent defaults and validate every field."""
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tiny = self.tiny if self.tiny is not None else not device.startswith("cuda")
        # One intra-op thread on CPU: the host path of a GPU run is one thread too, and
        # on a shared machine spinning OpenMP workers make run times swing 10x.
        threads = self.threads or (None if device.startswith("cuda") else 1)
        cfg = replace(self, device=device, tiny=tiny, model=self.model or DEFAULT_MODEL, threads=threads,
                      dtype=str(parse_dtype(self.dtype, device)).removeprefix("torch."))
        _validate(cfg)
        return cfg


def _validate(cfg: ProfileConfig) -> None:
    for name in ("batch_size", "seq_len", "new_tokens", "runs"):
        if getattr(cfg, name) < 1:
            raise UsageError("usage.invalid", f"{name} must be >= 1, got {getattr(cfg, name)}")
    if cfg.threads is not None and cfg.threads < 1:
        raise UsageError("usage.invalid", f"threads must be >= 1, got {cfg.threads}")
    if cfg.warmup < 0 or cfg.overhead_reps < 0:
        raise UsageError("usage.invalid", "warmup and overhead_reps must be >= 0")
    # an unknown preset, a bad override or a missing transformers fails before any work
    if cfg.model.startswith("hf:"):
        from .models.hf import require_transformers

        require_transformers(cfg.model[3:])
    else:
        spec = resolve_spec(cfg.model, tiny=cfg.tiny, layers=cfg.layers, hidden=cfg.hidden, experts=cfg.experts)
        _check_positions(cfg, spec.name, spec.max_positions)
    if cfg.backend not in BACKENDS:
        raise UsageError("usage.invalid", f"unknown backend {cfg.backend!r}", hint="use torch or nsys")
    if not re.fullmatch(r"cpu|cuda(:\d+)?", cfg.device):
        raise UsageError("usage.invalid", f"unknown device {cfg.device!r}", hint="use cpu, cuda or cuda:N")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise CaptureError("device.unavailable", f"device {cfg.device} requested but no CUDA device is present",
                           hint="drop --device to run on the CPU")


@dataclass
class RunResult:
    """A finished capture: where it is, its manifest, and the analysis (None if unavailable)."""

    run_dir: Path
    manifest: dict
    analysis: object | None = None


class LoadedModel:
    """The built model with what the manifest needs to say about it."""

    def __init__(self, cfg: ProfileConfig) -> None:
        if cfg.model.startswith("hf:"):
            self.spec, self.name = None, cfg.model
        else:
            self.spec = resolve_spec(cfg.model, tiny=cfg.tiny, layers=cfg.layers, hidden=cfg.hidden,
                                     experts=cfg.experts)
            self.name = self.spec.name
            check_memory(self.spec, cfg.dtype, cfg.device)
        self.module = build_model(self.spec or cfg.model, dtype=cfg.dtype, device=cfg.device, seed=cfg.seed)
        self.parameters = sum(p.numel() for p in self.module.parameters())
        hf_config = getattr(getattr(self.module, "model", None), "config", None)
        self.max_positions = self.spec.max_positions if self.spec else getattr(
            hf_config, "max_position_embeddings", None)


def check_memory(spec, dtype: str, device: str, available_bytes: int | None = None) -> None:
    """Refuse a model whose weights alone exceed the free memory of the device.

    A full-size MoE preset on a laptop CPU would otherwise die in the
    allocator or the OOM killer instead of saying what to do.
    """
    needed = count_parameters(spec) * torch.empty((), dtype=parse_dtype(dtype, device)).element_size()
    free = available_bytes if available_bytes is not None else free_memory_bytes(device)
    if free is not None and needed > free:
        raise CaptureError("capture.failed", f"{spec.name} needs {needed / 2**30:.1f} GiB for its weights; "
                           f"{free / 2**30:.1f} GiB free on {device}",
                           hint="use --tiny, fewer --layers, or a GPU")


def generate(model, input_ids: torch.Tensor, new_tokens: int, *, run_marker: bool = True) -> torch.Tensor:
    """One run: a prefill step and ``new_tokens - 1`` greedy decode steps.

    Every step is marked ``taxbreak/<phase>/<i>``; the run ``taxbreak/run/<r>``.
    Returns the generated ids ``[B, new_tokens]``.
    """
    outer = markers.run() if run_marker else contextlib.nullcontext()
    tokens = []
    with torch.inference_mode(), outer:
        ids, cache = input_ids, None
        for i in range(new_tokens):
            with markers.step("prefill" if i == 0 else "decode"):
                logits, cache = model(ids, cache=cache, logits_to_keep=1)
                ids = logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(ids)
        _sync(input_ids.device)
    return torch.cat(tokens, dim=1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_runs(model, input_ids, new_tokens: int, reps: int, on_rep: Callable[[int], None] | None = None) -> list[float]:
    """Wall time (ms) of ``reps`` runs, each ending with a device sync."""
    times_ms = []
    for rep in range(reps):
        start = time.perf_counter_ns()
        generate(model, input_ids, new_tokens)
        times_ms.append((time.perf_counter_ns() - start) / 1e6)
        if on_rep:
            on_rep(rep + 1)
    return times_ms


def profile(config: ProfileConfig, out_dir: str | Path | None = None,
            progress: Callable[[ProgressEvent], None] | None = None) -> RunResult:
    """Capture one workload into a run directory and analyze it.

    Args:
        config: model, shape and repetition counts.
        out_dir: the run directory; default ``./taxbreak-runs/<UTC time>-<model>/``.
        progress: called with :class:`ProgressEvent` updates (the CLI draws them).

    Returns:
        :class:`RunResult` with the run directory, its manifest and the
        ``Analysis`` (None when the decomposer is unavailable; the reason is
        in ``manifest["outputs"]``).

    Raises:
        UsageError, CaptureError: bad options, unknown model, missing nsys,
            a workload that fails.
    """
    cfg = config.resolved()
    with torch_threads(cfg.threads):
        return _profile(cfg, out_dir, progress or (lambda event: None))


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Set torch's intra-op thread count for the capture and restore it after."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _profile(cfg: ProfileConfig, out_dir, report) -> RunResult:
    if cfg.backend == "nsys":
        require_nsys()
    report(ProgressEvent("build", 0, 1))
    model = guard_workload(lambda: LoadedModel(cfg))
    _check_positions(cfg, model.name, model.max_positions)
    report(ProgressEvent("build", 1, 1))
    run_dir = Path(out_dir) if out_dir else mf.default_run_dir(model.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    input_ids = _prompt(cfg, model)
    guard_workload(lambda: timed_runs(model.module, input_ids, cfg.new_tokens, cfg.warmup,
                              lambda k: report(ProgressEvent("warmup", k, cfg.warmup))))
    base_ms = guard_workload(lambda: timed_runs(model.module, input_ids, cfg.new_tokens, cfg.overhead_reps,
                                        lambda k: report(ProgressEvent("baseline", k, cfg.overhead_reps))))
    if cfg.backend == "nsys":
        trace_path, traced_ms, profiler_info = _capture_nsys(cfg, run_dir, report)
    else:
        trace_path, traced_ms, profiler_info = _capture_torch(cfg, model, input_ids, run_dir, report)
    manifest = mf.build_manifest(cfg, model.name, model.spec, model.parameters, trace_path, profiler_info,
                                 mf.capture_overhead(base_ms, traced_ms, cfg.new_tokens))
    manifest["timings_ms"] = {"baseline_runs": base_ms, "recorded_runs": traced_ms}
    mf.write_json(run_dir / mf.MANIFEST, manifest)
    report(ProgressEvent("analyze", 0, 1))
    derived = mf.write_derived(run_dir, trace_path)
    mf.finish_manifest(run_dir, manifest, derived)
    report(ProgressEvent("analyze", 1, 1))
    return RunResult(run_dir=run_dir, manifest=manifest, analysis=derived.analysis)


def _prompt(cfg: ProfileConfig, model: LoadedModel) -> torch.Tensor:
    vocab = model.spec.vocab if model.spec else model.module.model.config.vocab_size
    gen = torch.Generator().manual_seed(cfg.seed)
    return torch.randint(0, vocab, (cfg.batch_size, cfg.seq_len), generator=gen).to(cfg.device)


def _check_positions(cfg: ProfileConfig, name: str, max_positions: int | None) -> None:
    needed = cfg.seq_len + cfg.new_tokens - 1
    if max_positions is not None and needed > max_positions:
        raise CaptureError("model.invalid", f"{name} has {max_positions} positions; "
                           f"seq_len + new_tokens - 1 = {needed}",
                           hint=f"lower --seq-len or --new-tokens (at most {max_positions} positions)")


def guard_workload(fn):
    """Workload failures (shape errors, out of memory) become ``capture.failed``."""
    try:
        return fn()
    except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
        raise CaptureError("capture.failed", f"the workload failed: {err}",
                           hint="try a smaller --batch-size/--seq-len or --tiny") from err


def _capture_torch(cfg: ProfileConfig, model: LoadedModel, input_ids, run_dir: Path, report):
    """Record ``cfg.runs`` runs in one torch.profiler trace; return (path, run times, info)."""
    markers.reset_counters()
    session = profiler_session(cfg.device, record_shapes=True, with_stack=cfg.with_stack)
    with session.profile as prof:
        traced_ms = guard_workload(lambda: timed_runs(model.module, input_ids, cfg.new_tokens, cfg.runs,
                                              lambda k: report(ProgressEvent("record", k, cfg.runs))))
    report(ProgressEvent("export", 0, 1))
    trace_path = run_dir / "trace.json.gz"
    with atomic_output(trace_path) as tmp:  # `profile --force` never writes through a link left in the folder
        prof.export_chrome_trace(str(tmp))
    report(ProgressEvent("export", 1, 1))
    info = {"tool": "torch.profiler", "activities": session.activity_names,
            "record_shapes": True, "with_stack": cfg.with_stack}
    return trace_path, traced_ms, info


# --- Nsight Systems backend -------------------------------------------------
# The same workload re-run in a child process under `nsys profile`; warm-up
# stays outside the capture via cudaProfilerApi start/stop around the
# recorded runs (CPU runs have no CUDA profiler API, so nsys records all).
NSYS_TRACE = "--trace=cuda,nvtx,cublas,cudnn,osrt"
NSYS_WORKER_CONFIG = "nsys_worker.json"
NSYS_TIMINGS = "nsys_timings.json"


def require_nsys() -> str:
    """The path of ``nsys``, or ``capture.nsys_missing``."""
    path = shutil.which("nsys")
    if path is None:
        raise CaptureError("capture.nsys_missing", "--backend nsys needs the Nsight Systems CLI (nsys) on PATH",
                           hint="install Nsight Systems and put nsys on PATH, or use --backend torch")
    return path


def nsys_commands(nsys: str, cfg: ProfileConfig, run_dir: Path) -> tuple[list[str], list[str]]:
    """The ``nsys profile`` and ``nsys export`` command lines of one capture.

    Paths are absolute: a run folder named ``-x`` would otherwise read as an option."""
    run_dir = Path(os.path.abspath(run_dir))
    profile_cmd = [nsys, "profile", NSYS_TRACE, "--force-overwrite=true", "-o", str(run_dir / "trace")]
    if str(cfg.device).startswith("cuda"):
        profile_cmd += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    profile_cmd += [sys.executable, "-m", "taxbreak.capture.runner", str(run_dir / NSYS_WORKER_CONFIG)]
    export_cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
                  "-o", str(run_dir / "trace.sqlite"), str(run_dir / "trace.nsys-rep")]
    return profile_cmd, export_cmd


def _capture_nsys(cfg: ProfileConfig, run_dir: Path, report):
    nsys = require_nsys()
    write_output(run_dir / NSYS_WORKER_CONFIG, json.dumps(asdict(cfg)))
    for name in ("trace.nsys-rep", "trace.sqlite"):  # nsys overwrites them in place: never through a link
        output_target(run_dir / name)
    profile_cmd, export_cmd = nsys_commands(nsys, cfg, run_dir)
    report(ProgressEvent("record", 0, cfg.runs))
    _run_tool(profile_cmd, "nsys profile")
    report(ProgressEvent("record", cfg.runs, cfg.runs))
    report(ProgressEvent("export", 0, 1))
    _run_tool(export_cmd, "nsys export", timeout_s=export_timeout_s())
    report(ProgressEvent("export", 1, 1))
    traced_ms = json.loads((run_dir / NSYS_TIMINGS).read_text())["recorded_runs_ms"]
    info = {"tool": "nsys", "trace": NSYS_TRACE, "commands": [profile_cmd, export_cmd]}
    return run_dir / "trace.sqlite", traced_ms, info


def _run_tool(cmd: list[str], what: str, timeout_s: float | None = None) -> None:
    """``cmd`` run to its end (or ``timeout_s``: the export; the profiled workload has no bound)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CaptureError("capture.failed", f"{what} did not finish: {err}") from err
    if done.returncode != 0:
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        raise CaptureError("capture.failed", f"{what} exited with {done.returncode}: {' | '.join(tail)}",
                           hint="run the command by hand: " + " ".join(cmd))


def _nsys_worker(config_path: str) -> None:
    """Child-process side of the nsys backend: warm up, then the recorded runs."""
    cfg = ProfileConfig(**json.loads(Path(config_path).read_text()))
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    model = LoadedModel(cfg)
    input_ids = _prompt(cfg, model)
    timed_runs(model.module, input_ids, cfg.new_tokens, cfg.warmup)
    cuda = str(cfg.device).startswith("cuda")
    markers.reset_counters()
    if cuda:
        torch.cuda.profiler.start()
    traced_ms = timed_runs(model.module, input_ids, cfg.new_tokens, cfg.runs)
    if cuda:
        torch.cuda.profiler.stop()
    write_output(Path(config_path).parent / NSYS_TIMINGS, json.dumps({"recorded_runs_ms": traced_ms}))


if __name__ == "__main__":
    _nsys_worker(sys.argv[1])
