"""Hashing and comparing the structure records of `funcgrad._pytree` when aux data do not hash.

JAX accepts aux data that do not hash (a dict, a list) wherever it need not hash them: its
treedef hash leaves them out, its equality compares them. Here a record that hashes is hashed
as it is (at C speed); one that does not is hashed without its unhashable aux data. Depends
only on the standard library.
"""

_AUX_EQ_ERROR = (
    "Exception raised while checking equality of the aux data of a pytree node ({error}). "
    "Make sure that aux data have simple equality semantics (arrays cannot be aux data: "
    "make them leaves)."
)


def _aux_hash(aux) -> int:
    try:
        return hash(aux)
    except TypeError:  # equal aux data of any type hash alike
        return 0


def nodes_hash(nodes: tuple) -> int:
    """The hash of a structure record. A structure whose aux data do not hash (a dict, a list:
    JAX accepts them) hashes without them, so it can still key a cache; equality compares them
    (`HashableNodes`)."""
    try:
        return tuple.__hash__(nodes)
    except TypeError:
        return hash(tuple(n if n is None else (n[0], _aux_hash(n[1]), n[2]) for n in nodes))


def nodes_equal(a: tuple, b: tuple) -> bool:
    """`a == b` for structure records; aux data whose comparison fails (arrays) raise a
    ValueError that says what to do, as in JAX."""
    try:
        return tuple.__eq__(a, b)  # (not `==`: `HashableNodes.__eq__` calls this)
    except Exception as e:
        raise ValueError(_AUX_EQ_ERROR.format(error=f"{type(e).__name__}: {e}")) from None


class HashableNodes(tuple):
    """A structure record that hashes whatever its aux data (`nodes_hash`); jit keys its cache
    with it when the plain record does not hash."""

    __slots__ = ()

    def __hash__(self) -> int:
        return nodes_hash(self)

    def __eq__(self, other):
        return nodes_equal(self, other) if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq
