"""prosecode_pager: the context pager as an installed package (``import prosecode_pager``).

The engine is ``prosecode_pager.pager`` (the same file ``python3 scripts/pager.py`` runs); its
public API, ``pager.__all__``, is re-exported here. Adapters: ``prosecode_pager.langchain_adapter``
and ``prosecode_pager.agents_adapter`` (extras ``[langchain]`` and ``[agents]``); the Claude Code
hooks ``prosecode_pager.claude_hooks`` and the MCP server ``prosecode_pager.mcp_server``.
"""

from . import pager
from .pager import *  # noqa: F401,F403

__all__ = list(pager.__all__)
__version__ = pager.__version__
