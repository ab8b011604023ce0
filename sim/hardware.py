"""Hardware catalogue: GPU presets keyed by the names scenarios use.

Figures from ../shared/REFERENCES.md (vendor datasheets): dense BF16 TFLOPS,
HBM capacity and bandwidth, NVLink bandwidth per GPU.
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


GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        GpuSpec("H100-SXM", peak_tflops=989.4, memory_GB=80, hbm_TB_s=3.35, nvlink_GB_s=900),
        GpuSpec("H200", peak_tflops=989.4, memory_GB=141, hbm_TB_s=4.8, nvlink_GB_s=900),
        GpuSpec("A100-80GB", peak_tflops=312.0, memory_GB=80, hbm_TB_s=2.04, nvlink_GB_s=600),
        GpuSpec("B200", peak_tflops=2250.0, memory_GB=180, hbm_TB_s=8.0, nvlink_GB_s=1800),
    )
}


def gpu_names() -> list[str]:
    return sorted(GPUS)
