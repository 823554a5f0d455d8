"""Clients of Tidemark's gRPC services, one module per service."""
