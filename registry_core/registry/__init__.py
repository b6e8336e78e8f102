"""The tool registry: discovery, parsing, variant matching and executable resolution.

Public entry points:

* :class:`RegistryLoader` scans ``$OLLIE_TOOLS_PATH`` and keeps a parse cache so
  a reload only re-reads what changed (and, given a cache directory, a scan
  cache so a new process need not read unchanged files at all);
* :class:`Registry` is an immutable snapshot: readers never see half a reload;
* :class:`Tool` is everything the registry knows about one tool name; its
  prompt and args live in :class:`ToolDocs`, which may read them on demand.
"""

from registry_core.registry.hostfacts import HostFacts, go_arch, go_os
from registry_core.registry.loader import RegistryLoader, load_registry
from registry_core.registry.model import (
    ConditionResult,
    MetaWarning,
    Resolution,
    Status,
    Tier,
    Tool,
    ToolDocs,
    VariantResult,
)
from registry_core.registry.snapshot import FunctionFormat, LoadedTool, Registry

__all__ = [
    "ConditionResult",
    "FunctionFormat",
    "HostFacts",
    "LoadedTool",
    "MetaWarning",
    "Registry",
    "RegistryLoader",
    "Resolution",
    "Status",
    "Tier",
    "Tool",
    "ToolDocs",
    "VariantResult",
    "go_arch",
    "go_os",
    "load_registry",
]
