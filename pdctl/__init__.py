"""pdctl: deploy, verify and co-restart prefill/decode disaggregated LLM deployments."""

__version__ = "0.1.0"
