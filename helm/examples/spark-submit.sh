#!/usr/bin/env bash
# An upsert through the services of `helm install tidemark helm/tidemark -n lake -f
# helm/tidemark/values-production.yaml`, submitted to Kubernetes in cluster mode. The
# tidemark_notes lines are the ones that release's NOTES print (labels for the
# NetworkPolicy, the client CA mounted from its Secret, the token as an env var from its
# Secret, so it is in neither the Spark configuration nor the UI); tests/helm checks them.
#
# The Python environment: a venv-pack archive of tidemark-hudi[spark], on the Python version of
# the Spark image (3.11):
#   python3.11 -m venv env && env/bin/pip install 'tidemark-hudi[spark]' venv-pack
#   env/bin/venv-pack -p env -o tidemark-env.tar.gz
set -euo pipefail

# What `helm install tidemark ... -n lake` NOTES print for Spark (values-production.yaml).
tidemark_notes=(
  --conf spark.kubernetes.driver.label.tidemark-client=true
  --conf spark.kubernetes.executor.label.tidemark-client=true
  --conf spark.kubernetes.driver.secrets.tidemark-client-tls=/etc/tidemark/client-tls
  --conf spark.kubernetes.executor.secrets.tidemark-client-tls=/etc/tidemark/client-tls
  --conf spark.kubernetes.driverEnv.TIDEMARK_CLIENT_TLS_CA_PATH=/etc/tidemark/client-tls/ca.crt
  --conf spark.executorEnv.TIDEMARK_CLIENT_TLS_CA_PATH=/etc/tidemark/client-tls/ca.crt
  --conf spark.kubernetes.driverEnv.TIDEMARK_CLIENT_TLS_CERT_PATH=/etc/tidemark/client-tls/tls.crt
  --conf spark.executorEnv.TIDEMARK_CLIENT_TLS_CERT_PATH=/etc/tidemark/client-tls/tls.crt
  --conf spark.kubernetes.driverEnv.TIDEMARK_CLIENT_TLS_KEY_PATH=/etc/tidemark/client-tls/tls.key
  --conf spark.executorEnv.TIDEMARK_CLIENT_TLS_KEY_PATH=/etc/tidemark/client-tls/tls.key
  --conf spark.kubernetes.driver.secretKeyRef.TIDEMARK_CLIENT_TOKEN=tidemark-tokens:token
  --conf spark.kubernetes.executor.secretKeyRef.TIDEMARK_CLIENT_TOKEN=tidemark-tokens:token
)
tidemark_services=(
  --marker-service dns:///tidemark-marker.lake.svc.cluster.local:50051
  --index-service tidemark-index-0.tidemark-index.lake.svc.cluster.local:50052,tidemark-index-1.tidemark-index.lake.svc.cluster.local:50052,tidemark-index-2.tidemark-index.lake.svc.cluster.local:50052
)

# The image needs Spark 4.1 on Python 3.11 (the archive's) and hadoop-aws for s3a://.
spark-submit \
  --master "k8s://https://${KUBERNETES_SERVICE_HOST:-kubernetes.default.svc}:443" \
  --deploy-mode cluster \
  --name events-upsert \
  --conf spark.kubernetes.namespace=lake \
  --conf spark.kubernetes.container.image=registry.example.com/data/spark:4.1.0-python3.11 \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark \
  --conf spark.kubernetes.file.upload.path=s3a://lake/spark-uploads \
  --conf spark.executor.instances=4 \
  --archives tidemark-env.tar.gz#environment \
  --conf spark.pyspark.python=./environment/bin/python \
  "${tidemark_notes[@]}" \
  spark_jobs/write/__main__.py \
  --table s3://lake/tables/events \
  --input s3://lake/incoming/events-2026-11-24.parquet \
  --op upsert \
  --key event_id \
  --partition event_date \
  "${tidemark_services[@]}"
