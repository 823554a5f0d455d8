"""Tidemark gRPC services; each subpackage exposes a ServiceDefinition for ``tidemark serve``."""
