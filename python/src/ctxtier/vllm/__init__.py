"""ctxtier.vllm: a vLLM v1 KV connector that fetches KV blocks from ctxtier.

Load it the way vLLM loads external connectors::

    vllm serve MODEL --prefix-caching-hash-algo sha256_cbor --kv-transfer-config \\
      '{"kv_connector":"CtxtierConnector","kv_connector_module_path":"ctxtier.vllm",
        "kv_role":"kv_both","kv_load_failure_policy":"recompute",
        "kv_connector_extra_config":{"addr":"127.0.0.1:7400","namespace":"vllm"}}'

Blocks are keyed by vLLM's own block hashes (see :mod:`ctxtier.hashing`), so
ctxtier, vLLM's prefix cache and vLLM's KV events name a block the same way.
See docs/engines.md. Importing this package needs ``vllm`` and ``torch``.
"""

from .config import Config, DefaultConfig
from .connector import CtxtierConnector, CtxtierConnectorMetadata

__all__ = ["Config", "DefaultConfig", "CtxtierConnector", "CtxtierConnectorMetadata"]
