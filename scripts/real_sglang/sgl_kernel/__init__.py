"""A CPU stand-in for the `sgl_kernel` package, for the real-SGLang test lane (scripts/install_real_sglang.sh copies
this directory into the lane's venv as the package `sgl_kernel`).

SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1) imports two helpers from sgl_kernel at module level, and PyPI has no CPU
build of it (the sglang-kernel wheels carry CUDA code only). These are the two, written with torch alone, doing what
SGLang's Triton kernels of the same purpose do. Any other name can be imported (SGLang imports some at module level
behind features this lane never turns on) but raises NotImplementedError when called, so nothing silently does the
wrong thing. No torch.ops.sgl_kernel.* op is registered, so SGLang's cpu_has_amx_support() stays False and every
layer takes its plain-torch path, as a real CPU build would on a CPU without AMX.
"""

from __future__ import annotations

import ctypes

import torch

__version__ = "0.0.0+pdctl.cpu.stand.in"

__all__ = ["assign_req_to_token_pool_cpu", "copy_all_layer_kv_cache_cpu"]


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Row req_pool_indices[i] of req_to_token gets, in columns start_offset[i]:end_offset[i], the next
    end-start entries of out_cache_loc (the requests' slices lie one after another in it)."""
    del pool_len  # the row length; req_to_token is 2-D here, so indexing needs no flat offset
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    taken = 0
    for row, start, end in zip(rows, starts, ends):
        n = end - start
        if n > 0:
            req_to_token[row, start:end] = out_cache_loc[taken : taken + n].to(req_to_token.dtype)
        taken += n


def _rows_at(address: int, row_bytes: int, n_rows: int) -> torch.Tensor:
    """A (n_rows, row_bytes) uint8 view of the memory at address (a KV buffer SGLang owns)."""
    raw = (ctypes.c_uint8 * (row_bytes * n_rows)).from_address(address)
    return torch.frombuffer(raw, dtype=torch.uint8).view(n_rows, row_bytes)


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """For every buffer (its address in data_ptrs, its row size in bytes in strides), copy row src_loc[j] to row
    tgt_loc[j]. All source rows are read before any is written, so overlapping moves are safe."""
    if src_loc.numel() == 0:
        return
    src = src_loc.to(torch.int64)
    tgt = tgt_loc.to(torch.int64)
    n_rows = int(torch.maximum(src.max(), tgt.max()).item()) + 1
    for address, row_bytes in zip(data_ptrs.tolist(), strides.tolist()):
        rows = _rows_at(int(address), int(row_bytes), n_rows)
        rows[tgt] = rows[src]  # the right side is gathered into a new tensor first


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def not_in_stand_in(*args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not in pdctl's CPU stand-in (scripts/real_sglang/sgl_kernel): only "
            + ", ".join(__all__)
            + " are"
        )

    not_in_stand_in.__name__ = name
    return not_in_stand_in
