"""Structured control flow that composes with every transform: `cond`, `switch`,
`while_loop`, `fori_loop`, `scan` and `map`, each a primitive holding sub-programs.

`cond.py` holds `cond_p`, `scan.py` holds `scan_p`, `loops.py` holds `while_p` and the
loops built on it or on scan; `common.py` the sub-program helpers they share.
"""

from funcgrad.lax.control_flow.cond import cond, cond_p, switch
from funcgrad.lax.control_flow.loops import fori_loop, map, while_loop, while_p
from funcgrad.lax.control_flow.scan import scan, scan_p

__all__ = ["cond", "cond_p", "fori_loop", "map", "scan", "scan_p", "switch", "while_loop",
           "while_p"]
