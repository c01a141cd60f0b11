from funcgrad.nn.functions import *  # noqa: F401,F403
