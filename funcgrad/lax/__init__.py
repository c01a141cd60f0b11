"""funcgrad.lax: the primitive layer, with JAX's names (`add`, `dot_general`, `cond`, ...).

Each family lives in its own module; this package re-exports their public wrappers.
"""

from funcgrad.interpreters.ad import add_any_p  # noqa: F401
from funcgrad.lax.control_flow import *  # noqa: F401,F403
from funcgrad.lax.convolution import *  # noqa: F401,F403
from funcgrad.lax.elementwise import *
from funcgrad.lax.indexing import *  # noqa: F401,F403
from funcgrad.lax.linalg import *  # noqa: F401,F403
from funcgrad.lax.logic import *  # noqa: F401,F403
from funcgrad.lax.parallel import *  # noqa: F401,F403
from funcgrad.lax.reductions import *  # noqa: F401,F403
from funcgrad.lax.shape import *  # noqa: F401,F403
from funcgrad.lax.slicing import *  # noqa: F401,F403
from funcgrad.lax.sorting import *  # noqa: F401,F403
from funcgrad.lax.special import *  # noqa: F401,F403
