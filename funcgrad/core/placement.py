"""Where a result lives: the one home of JAX's `out_sharding=` (and `sharding=`) arguments.

A funcgrad result lives on one device, so a sharding given to an operation must name exactly
one: `None` (where its operands are, as without the argument), a `Device`, or any object with
JAX's `Sharding` interface (`device_set`) over one device. Anything else is an error naming
the operation. `sharding_device` is the hook that reads a sharding; a concrete result is
moved with `device_put`, a traced one is left as it is (placement is a property of concrete
arrays, as in `numpy.creation.place`). `funcgrad.devices` registers `Device` and
`device_put` in `core.ops` (the layer above core).

    >>> place("zeros", fnp.zeros(2), fg.devices()[0])
    Array([0., 0.], dtype=float32)
"""

from funcgrad import errors, tree_util
from funcgrad.core.array import Array
from funcgrad.core.ops import ops


def sharding_device(name, sharding, what="out_sharding"):
    """The one `Device` that `sharding` names, or None for `sharding=None`."""
    if sharding is None or isinstance(sharding, ops.Device):
        return sharding
    device_set = getattr(sharding, "device_set", None)
    if device_set is None:
        raise errors.op_error(
            name, f"{what} must be None, a Device or a sharding, got "
            f"{type(sharding).__name__} {errors.short_repr(sharding, 40)}",
            cls=errors.FuncgradTypeError, hint="pass None to keep the result where its "
            "operands are, or a device from fg.devices()")
    devices = list(device_set)
    if len(devices) != 1 or not isinstance(devices[0], ops.Device):
        raise errors.op_error(
            name, f"{what}={sharding!r} spans {len(devices)} devices; a funcgrad result "
            "lives on one device", cls=errors.FuncgradValueError,
            hint="compute across devices with shard_map, and give a one-device sharding "
            "(or None) here")
    return devices[0]


def place(name, x, sharding, what="out_sharding"):
    """`x` (a pytree of results) on the device `sharding` names; `x` itself for None."""
    if sharding is None:
        return x
    device = sharding_device(name, sharding, what)
    return tree_util.tree_map(lambda v: ops.device_put(v, device) if type(v) is Array else v,
                              x)
