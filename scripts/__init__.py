"""prosecode_pager: the context pager as an installed package (``import prosecode_pager``).

The engine is ``prosecode_pager.pager`` (the same file ``python3 scripts/pager.py`` runs); its
public API is re-exported here. Adapters: ``prosecode_pager.langchain_adapter`` and
``prosecode_pager.agents_adapter`` (extras ``[langchain]`` and ``[agents]``).
"""

from . import pager
from .pager import *  # noqa: F401,F403

# The engine's __all__ when it has one, else its documented public names; plus the library's
# (_LIBRARY_ALL), which the engine's __all__ may not list yet.
__all__ = list(getattr(pager, "__all__", None) or [
    "load", "detect_format", "conversation_blocks", "emit", "validate", "plan_pass", "estimate_tokens",
    "main", "PagerError", "FORMATS", "Params", "Decision", "PassPlan", "Intent", "StoredPage", "PageStore",
    "make_stub"])
__all__ += [name for name in pager._LIBRARY_ALL if name not in __all__]
globals().update({name: getattr(pager, name) for name in __all__})
__version__ = pager.__version__
