# The service image: the base package (no pyspark), run as a non-root user, `tidemark serve`
# as entrypoint (the chart passes `marker|index|planner` and flags as args).
# docker build -t tidemark:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE pyspark_tidemark.py ./
COPY tidemark tidemark
COPY services services
COPY spark_jobs spark_jobs
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels tidemark-hudi \
    && rm -rf /wheels \
    && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin tidemark
USER 10001:10001
WORKDIR /tmp
EXPOSE 50051 50052 50053 9464 9465 9466 8086
ENTRYPOINT ["tidemark", "serve"]
CMD ["all", "--host", "0.0.0.0"]
