"""A toy backend written outside funcgrad, as a user would (a test case, not part of the
library): it walks a fused program node by node, each kernel's equations and each library
call through the primitives' eager implementations, and counts what it did. It follows the
backend contract (`funcgrad/backends/__init__.py`) and declares no capability.

    funcgrad.backends.register_backend("toy", toy_backend)
    funcgrad.jit(f, backend="toy")(x)
"""

import math

import numpy as np

from funcgrad.compiler.fusion import KernelNode
from funcgrad.compiler.memory import MemoryAnalysis
from funcgrad.core import Literal

compiled = []  # the programs compiled, in order


class ToyExecutable:
    def __init__(self, program, ir):
        self.program, self.ir, self.calls, self.nodes_run = program, ir, 0, 0

    def __call__(self, *arrays):
        self.calls += 1
        j = self.program.jaxpr
        env = dict(zip(j.constvars, self.program.consts))
        env.update(zip(j.invars, arrays))
        read = lambda v: v.val if type(v) is Literal else env[v]
        for node in self.program.nodes:
            eqns = node.eqns + [e for e in node.out_eqns if e not in node.eqns] if isinstance(
                node, KernelNode) else [node.eqn]
            for e in eqns:
                outs = e.prim.bind(*[read(v) for v in e.invars], **e.params)
                outs = outs if e.prim.multiple_results else [outs]
                env.update(zip(e.outvars, outs))
            self.nodes_run += 1
        return [np.asarray(read(v)) for v in j.outvars]

    def as_text(self):
        return "toy program\n" + self.program.summary()

    def ir_text(self):
        return str(self.ir)

    def memory_analysis(self):
        size = lambda v: math.prod(v.aval.shape) * v.aval.dtype.itemsize
        j = self.program.jaxpr
        args, outs = sum(map(size, j.invars)), sum(size(v) for v in j.outvars
                                                   if type(v) is not Literal)
        return MemoryAnalysis(args, outs, 0, args + outs, 0, 0)


def compile_program(program, donate_argnums=(), ir=None, compile_subprogram=None):
    exe = ToyExecutable(program, ir)
    compiled.append(exe)
    return exe


__all__ = ["ToyExecutable", "compile_program", "compiled"]
