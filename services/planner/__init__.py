"""Planner service: size-based clustering plans and compaction plans saved on Hudi
timelines, over gRPC.

``SERVICE`` is what ``tidemark serve planner`` loads from the runtime's registry.
Settings come from ``TIDEMARK_PLANNER_*`` env vars (see ``config.PlannerConfig``).
"""

from __future__ import annotations

import grpc
import structlog

from tidemark.proto.planner.v1 import planner_service_pb2_grpc as pb_grpc
from tidemark.rpc.auth import Role
from tidemark.rpc.limits import KIB, MethodPolicy
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition
from tidemark.services.planner.config import PlannerConfig
from tidemark.services.planner.engine import PlannerEngine
from tidemark.services.planner.metrics import PlannerMetrics
from tidemark.services.planner.servicer import PlannerServicer

log = structlog.get_logger(__name__)

FULL_NAME = "tidemark.planner.v1.PlannerService"


METHODS = {
    "SchedulePlan": MethodPolicy(Role.WRITE, 64 * KIB),
    "ListPlans": MethodPolicy(Role.READ),
    "GetPlan": MethodPolicy(Role.READ),
    "CancelPlan": MethodPolicy(Role.ADMIN),
    "SetTriggerPolicy": MethodPolicy(Role.WRITE, 64 * KIB),
    "GetTriggerPolicy": MethodPolicy(Role.READ),
    "SetRetentionPolicy": MethodPolicy(Role.WRITE, 64 * KIB),
    "GetRetentionPolicy": MethodPolicy(Role.READ),
    "RunRetention": MethodPolicy(Role.ADMIN),
    "ScheduleCompaction": MethodPolicy(Role.WRITE, 64 * KIB),
    "ListCompactions": MethodPolicy(Role.READ),
    "CancelCompaction": MethodPolicy(Role.ADMIN),
    "SetCompactionPolicy": MethodPolicy(Role.WRITE, 64 * KIB),
    "GetCompactionPolicy": MethodPolicy(Role.READ),
}
"""Every request is a table, an instant and a few options."""


def planner_service(
    config: PlannerConfig | None = None, engine: PlannerEngine | None = None
) -> ServiceDefinition:
    """The service definition; without ``config`` settings load from the env when served."""

    def add_to_server(server: grpc.aio.Server, context: ServiceContext) -> Closeable:
        running = engine or PlannerEngine(config or PlannerConfig.load())
        pb_grpc.add_PlannerServiceServicer_to_server(
            PlannerServicer(running, context.config), server
        )
        context.metrics.register(PlannerMetrics(running))
        log.info(
            "planner service ready",
            owner=running.owner,
            lock_wait_s=running.config.lock_wait_s,
            tables=list(running.config.tables),
        )
        return running

    return ServiceDefinition(
        name="planner", full_name=FULL_NAME, add_to_server=add_to_server, methods=METHODS
    )


SERVICE = planner_service()
