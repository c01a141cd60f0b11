"""The few operations that core and the interpreters use but do not define.

lax defines them and registers each from its primitive's block at import
(`register_op("transpose", transpose)`); the interpreters call `ops.transpose(x, perm)`.
So core and the interpreters import no lax module, and an operation nobody registered is
named in the error instead of failing deep inside a transform. Entries are filled at import
time and read-only afterwards. Registered now (by funcgrad.lax):
  full(shape, fill_value, dtype)          symbolic zeros made real (`ad.instantiate`),
  transpose(x, perm)                      batch axes moved (`batching.moveaxis`),
  broadcast_in_dim(x, shape, dims)        unbatched operands broadcast (`batching`),
  pvary                                   the primitive casting invariant values to varying,
                                          bound by the typing of a builder (`trace.vma_rules`).
and by funcgrad.devices:
  Device, device_put(x, device)           a result moved where `out_sharding=` says
                                          (`core.placement`).
This module imports only funcgrad.errors.
"""

from funcgrad import errors


class _Ops:
    """The registered operations, read as attributes (`ops.transpose`)."""

    def __getattr__(self, name):  # reached only for a name nobody registered
        raise errors.FuncgradInternalError(
            f"no operation `{name}` is registered in funcgrad.core.ops (funcgrad.lax "
            "registers them when it is imported)")


ops = _Ops()


def register_op(name, fn):
    """Make `fn` (a function or a Primitive) the operation `ops.<name>`; returns `fn`."""
    setattr(ops, name, fn)
    return fn


__all__ = ["ops", "register_op"]
