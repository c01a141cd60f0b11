"""The checks of `jit`'s options on its function's signature: static and donated arguments
(positions and names completed from each other, as JAX does), device or backend, compiler
options (`compiler/jit.py` asks them once per `jit(f)`)."""

import inspect

from funcgrad import errors


def signature_of(fun):
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def ints(x, what):
    nums = (x,) if isinstance(x, int) else tuple(x or ())
    if not all(isinstance(i, int) for i in nums):
        raise errors.FuncgradTypeError(f"jit: {what} must be an int or a tuple of ints, got "
                                       f"{errors.short_repr(x, 60)}\n{errors.where()}")
    return nums


def strs(x):
    return (x,) if isinstance(x, str) else tuple(x or ())


def donated_args(sig, nums, names, fun_name):
    """(donated positions, donated names), each completed from the other through the
    signature, as JAX does; a name of no parameter is an error (unless `**kwargs`)."""
    if sig is None:
        return tuple(sorted(set(nums))), frozenset(names)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if names and not any(p.kind == p.VAR_KEYWORD for p in params):
        unknown = [n for n in names if n not in sig.parameters]
        if unknown:
            raise errors.FuncgradValueError(
                f"jit({fun_name}): donate_argnames={names} names {unknown}, which are not "
                f"parameters of `{fun_name}`{sig}\n{errors.where()}")
    by_name = {p.name: i for i, p in enumerate(positional)}
    nums = set(nums) | {by_name[n] for n in names if n in by_name}
    names = set(names) | {positional[i].name for i in nums if -len(positional) <= i
                          < len(positional) and positional[i].kind != positional[i].POSITIONAL_ONLY}
    return tuple(sorted(nums)), frozenset(names)


def device_backend(device, backend, fun_name):
    """(device or None, backend) of `jit(device=, backend=)`: JAX takes one of them."""
    if device is None:
        return None, backend
    from funcgrad.devices import Device
    if not isinstance(device, Device):
        raise errors.FuncgradTypeError(f"jit({fun_name}): device must be a Device (from "
                                       f"fg.devices()), got {errors.short_repr(device)}\n"
                                       f"{errors.where()}")
    if backend is not None:
        raise errors.FuncgradValueError(f"jit({fun_name}): can't specify both a device and a "
                                        f"backend, got device={device} and backend={backend!r}"
                                        f"\n{errors.where()}")
    return device, "cpu" if device.platform == "cpu" else "cuda"


def check_compiler_options(options, fun_name):
    if options is not None and not (isinstance(options, dict)
                                    and all(isinstance(k, str) for k in options)):
        raise errors.FuncgradTypeError(f"jit({fun_name}): compiler_options must be a dict with "
                                       f"str keys, got {errors.short_repr(options)}\n"
                                       f"{errors.where()}")


def static_args(sig, nums, names, fun_name):
    """Complete static positions and names from each other through the signature."""
    if sig is None:
        return tuple(sorted(set(nums))), frozenset(names)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    for i in nums:
        if not var_pos and not -len(positional) <= i < len(positional):
            raise errors.FuncgradValueError(
                f"jit({fun_name}): static_argnums={nums} refers to argument {i}, but "
                f"`{fun_name}` takes {len(positional)} positional argument(s)\n{errors.where()}")
    by_name = {p.name: i for i, p in enumerate(positional)}
    for n in names:
        if n not in sig.parameters and not var_kw:
            raise errors.FuncgradValueError(
                f"jit({fun_name}): static_argnames={names} names `{n}`, which is not a "
                f"parameter of `{fun_name}`{sig}\n{errors.where()}")
    nums = {i % len(positional) if i < 0 and not var_pos else i for i in nums}
    nums |= {by_name[n] for n in names if n in by_name}
    names = set(names) | {positional[i].name for i in nums if i < len(positional)
                          and positional[i].kind != positional[i].POSITIONAL_ONLY}
    return tuple(sorted(nums)), frozenset(names)
