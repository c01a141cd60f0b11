"""Where a result lives: the one home of JAX's `out_sharding=` (and `sharding=`) arguments.

A sharding given to an operation is `None` (where its operands are, as without the
argument), a `Device`, or a `funcgrad.sharding` sharding (anything with JAX's `Sharding`
interface, `device_set`); anything else is an error naming the operation. A concrete result
is placed with `device_put` (which lays it out over a `NamedSharding`'s devices), a traced one
is left as it is (placement is a property of concrete arrays, as in `numpy.creation.place`).
`funcgrad.devices` registers `Device` and `device_put` in `core.ops` (the layer above core).

    >>> place("zeros", fnp.zeros(2), fg.devices()[0])
    Array([0., 0.], dtype=float32)
"""

from funcgrad import errors, tree_util
from funcgrad.core.array import Array
from funcgrad.core.ops import ops


def check_sharding(name, sharding, what="out_sharding"):
    """What to place a result on: `sharding` itself when it is None, a `Device` or a
    `funcgrad.sharding` sharding; the one device of another object with JAX's `Sharding`
    interface (`device_set`)."""
    if sharding is None or isinstance(sharding, (ops.Device, ops.Sharding)):
        return sharding
    device_set = getattr(sharding, "device_set", None)
    if device_set is None:
        raise errors.op_error(
            name, f"{what} must be None, a Device or a sharding, got "
            f"{type(sharding).__name__} {errors.short_repr(sharding, 40)}",
            cls=errors.FuncgradTypeError, hint="pass None to keep the result where its "
            "operands are, a device from fg.devices(), or a funcgrad.sharding.NamedSharding")
    devices = list(device_set)
    if len(devices) != 1 or not isinstance(devices[0], ops.Device):
        raise errors.op_error(
            name, f"{what}={errors.short_repr(sharding, 40)} spans {len(devices)} devices and "
            "is no funcgrad sharding", cls=errors.FuncgradValueError,
            hint="lay a result out over several devices with funcgrad.sharding.NamedSharding")
    return devices[0]


def place(name, x, sharding, what="out_sharding"):
    """`x` (a pytree of results) placed as `sharding` says; `x` itself for None."""
    if sharding is None:
        return x
    sharding = check_sharding(name, sharding, what)
    return tree_util.tree_map(
        lambda v: ops.device_put(v, sharding) if type(v) is Array else v, x)
