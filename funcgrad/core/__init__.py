"""The core: the IR (`ir`), concrete arrays (`array`) and tracing (`trace`).

Everything else in funcgrad is built from these names.
"""

from funcgrad.core.array import Array, ArrayBase, to_array
from funcgrad.core.ir import (
    ClosedJaxpr,
    Eqn,
    Jaxpr,
    JaxprTypeError,
    Literal,
    ShapedArray,
    Var,
    pp_jaxpr,
    typecheck_jaxpr,
)
from funcgrad.core.ops import ops, register_op
from funcgrad.core.reduce_op import ReduceOp
from funcgrad.core.trace import (
    Builder,
    Primitive,
    Tracer,
    bind_at,
    computing_known_for,
    concrete_value,
    current_source,
    current_trace,
    eval_concrete,
    eval_jaxpr,
    get_aval,
    is_concrete,
    jaxpr_as_fun,
    name_scope,
    new_builder,
    set_trace,
    source_context,
    trace_to_jaxpr,
    vma_rules,
    widened,
)

__all__ = [
    "Array", "ArrayBase", "Builder", "ClosedJaxpr", "Eqn", "Jaxpr", "JaxprTypeError", "Literal",
    "Primitive", "ReduceOp", "ShapedArray", "Tracer", "Var", "bind_at", "concrete_value",
    "current_source", "computing_known_for", "current_trace", "eval_concrete", "eval_jaxpr",
    "get_aval", "is_concrete", "jaxpr_as_fun", "name_scope", "new_builder", "ops", "pp_jaxpr",
    "register_op", "set_trace", "source_context", "to_array", "trace_to_jaxpr",
    "typecheck_jaxpr", "vma_rules", "widened",
]
