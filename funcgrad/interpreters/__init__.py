"""Transforms as interpreters over the IR: `ad` (jvp, linearize, vjp, grad), `batching`
(vmap) and `partial_eval` (splitting a program into known and unknown parts)."""
