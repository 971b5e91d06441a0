"""How one vLLM KV block becomes one ctxtier block, and back.

A ctxtier block holds, for one vLLM block id, the slice of every layer's
paged KV tensor at that block, layers in name order, each slice's bytes in
the tensor's own element order (C order of ``kv.select(block_dim, id)``).
Two engines running the same model, dtype, attention backend and
tensor-parallel rank therefore read and write identical bytes.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import torch


class LayoutError(ValueError):
    """The KV cache tensors do not have the shape the connector needs."""


class BlockLayout:
    """Gathers one block's KV from every layer into a buffer and scatters it back."""

    def __init__(self, kv_caches: Dict[str, torch.Tensor], num_blocks: int):
        if not kv_caches:
            raise LayoutError("no KV cache tensors registered")
        if num_blocks < 1:
            raise LayoutError(f"num_blocks {num_blocks} must be positive")
        self.num_blocks = num_blocks
        self.layers: List[Tuple[str, torch.Tensor, int, torch.Size, int]] = []
        off = 0
        for name in sorted(kv_caches):
            kv = kv_caches[name]
            dims = [d for d, n in enumerate(kv.shape) if n == num_blocks]
            if not dims:
                raise LayoutError(f"layer {name}: no dimension of size num_blocks={num_blocks} in shape {tuple(kv.shape)}")
            # vLLM's layouts put the block dimension first, or second after the
            # K/V pair dimension of size 2.
            dim = dims[0]
            if dim == 0 and kv.shape[0] == 2 and len(dims) > 1 and dims[1] == 1:
                dim = 1
            shape = kv.select(dim, 0).shape
            nbytes = kv.select(dim, 0).numel() * kv.element_size()
            self.layers.append((name, kv, dim, shape, off))
            off += nbytes
        self.block_bytes = off
        self.device = self.layers[0][1].device

    def alloc(self, pin: bool = False) -> torch.Tensor:
        """A CPU byte buffer for one block."""
        return torch.empty(self.block_bytes, dtype=torch.uint8, pin_memory=pin)

    def _views(self, buf: torch.Tensor):
        for i, (name, kv, dim, shape, off) in enumerate(self.layers):
            end = self.layers[i + 1][4] if i + 1 < len(self.layers) else self.block_bytes
            yield kv, dim, buf[off:end].view(kv.dtype).view(shape)

    def gather(self, block_id: int, buf: torch.Tensor) -> torch.Tensor:
        """Copy block block_id of every layer into buf (block_bytes uint8) and return buf."""
        self._check(block_id, buf)
        for kv, dim, view in self._views(buf):
            view.copy_(kv.select(dim, block_id))
        return buf

    def scatter(self, block_id: int, buf: torch.Tensor) -> None:
        """Copy buf (as written by gather) into block block_id of every layer."""
        self._check(block_id, buf)
        for kv, dim, view in self._views(buf):
            kv.select(dim, block_id).copy_(view)

    def _check(self, block_id: int, buf: torch.Tensor) -> None:
        if not 0 <= block_id < self.num_blocks:
            raise LayoutError(f"block id {block_id} out of range 0..{self.num_blocks - 1}")
        if buf.dtype != torch.uint8 or buf.numel() != self.block_bytes:
            raise LayoutError(f"buffer is {buf.numel()} {buf.dtype}, want {self.block_bytes} uint8")
