"""Hardware catalogue: GPU presets keyed by the names scenarios use.

Figures from the vendors' datasheets: dense BF16 TFLOPS, HBM capacity and
bandwidth, NVLink bandwidth per GPU. docs/references.md gives each source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: what the performance model needs to know about it."""

    name: str
    peak_tflops: float  # dense BF16
    memory_GB: float
    hbm_TB_s: float
    nvlink_GB_s: float
    # the best share of peak a BF16 dense GEMM has been measured to reach on it (None: no
    # measurement): a calibration that needs more is suspect (sim.model.perf warns)
    best_gemm_efficiency: float | None = None


# best_gemm_efficiency: the maximum achievable matmul FLOPS (MAMF) of BF16 GEMMs over a
# scan of large shapes, over the peak (Bekman, "Machine Learning Engineering",
# compute/accelerator, the MAMF comparison table): H100/H200 SXM 794.5 of 989 TFLOPS
# (80.3%), A100 SXM 267.9 of 312 (85.9%), B200 SXM 1,745 of 2,250 (77.6%)
GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        GpuSpec(
            "H100-SXM",
            peak_tflops=989.4,
            memory_GB=80,
            hbm_TB_s=3.35,
            nvlink_GB_s=900,
            best_gemm_efficiency=0.803,
        ),
        GpuSpec(
            "H200",
            peak_tflops=989.4,
            memory_GB=141,
            hbm_TB_s=4.8,
            nvlink_GB_s=900,
            best_gemm_efficiency=0.803,
        ),
        GpuSpec(
            "A100-80GB",
            peak_tflops=312.0,
            memory_GB=80,
            hbm_TB_s=2.04,
            nvlink_GB_s=600,
            best_gemm_efficiency=0.859,
        ),
        GpuSpec(
            "B200",
            peak_tflops=2250.0,
            memory_GB=180,
            hbm_TB_s=8.0,
            nvlink_GB_s=1800,
            best_gemm_efficiency=0.776,
        ),
    )
}


@dataclass(frozen=True)
class TierPreset:
    """Typical figures of a storage tier kind; a scenario may override any of them.

    Sources in docs/references.md ("approx." figures are secondary write-ups):
    large Lustre/GPFS systems reach 100s of GB/s to TB/s (an NVMe OST ~5-10 GB/s,
    an HDD OST ~1-3 GB/s); a single NFS server ~2-10 GB/s; object stores are
    wide but slow per request. Capacities and latencies are typical (approx.).
    """

    kind: str
    write_GB_s: float
    read_GB_s: float
    capacity_TB: float
    latency_ms: float  # per operation: opening, committing, listing a checkpoint
    ost_GB_s: float | None = None  # Lustre: one object storage target


TIERS: dict[str, TierPreset] = {
    preset.kind: preset
    for preset in (
        # 32 NVMe OSTs of ~5 GB/s (approx.); reads ~1.5x writes
        TierPreset(
            "lustre", write_GB_s=160, read_GB_s=240, capacity_TB=2000, latency_ms=1.0, ost_GB_s=5.0
        ),
        TierPreset("gpfs", write_GB_s=150, read_GB_s=225, capacity_TB=2000, latency_ms=1.0),
        TierPreset("weka", write_GB_s=200, read_GB_s=400, capacity_TB=1000, latency_ms=0.5),
        TierPreset("nfs", write_GB_s=5, read_GB_s=8, capacity_TB=500, latency_ms=2.0),
        TierPreset("object", write_GB_s=20, read_GB_s=40, capacity_TB=100000, latency_ms=50.0),
    )
}
