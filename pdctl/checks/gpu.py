"""GPU utilisation of a decode host, from `nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits`.

The seed's idle-decode evidence: "GPU at 0% while requests sit inflight". The command prints one line per GPU
(an integer percentage, or "[N/A]" / "[Not Supported]" where the board cannot say); without a driver it prints an
error such as "No devices were found" instead.
"""

from __future__ import annotations

NVIDIA_SMI_UTILISATION = "nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits"


def parse_gpu_util(text: str) -> list[float]:
    """The percentages, one per GPU that reported one, in nvidia-smi's order. Pure; lines that are not a number
    (an "[N/A]" board, an error message) are left out, so no GPU is ever read as 0% idle by mistake."""
    out = []
    for line in text.splitlines():
        try:
            out.append(float(line.strip()))
        except ValueError:
            continue
    return out
