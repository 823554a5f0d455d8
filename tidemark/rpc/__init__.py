"""gRPC runtime shared by every Tidemark service and client.

``server.build_server`` runs services (health, reflection, metrics, error mapping,
graceful shutdown); ``client`` opens channels lazily per process and retries;
``registry`` names the services ``tidemark serve`` can run.
"""
