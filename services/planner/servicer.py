"""gRPC servicer of tidemark.planner.v1.PlannerService over the planner engine.

Handlers validate the request, run the engine's blocking work (storage, the table lock)
in a thread and build the answer; the runtime's interceptor maps ``tidemark.errors`` to
status codes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from tidemark.config import ServerConfig
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.proto.planner.v1 import planner_service_pb2_grpc as pb_grpc
from tidemark.services.planner import compaction, messages, requests, retention
from tidemark.services.planner.engine import PlannerEngine
from tidemark.table import HoodieTable

Context = grpc.aio.ServicerContext[Any, Any]


class PlannerServicer(pb_grpc.PlannerServiceServicer):
    def __init__(self, engine: PlannerEngine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config

    async def _table(self, base_path: str) -> HoodieTable:
        """The request's table, checked and opened once for the call (in a thread: opening
        reads ``hoodie.properties`` and lists the timeline); the engine takes it opened."""
        uri = requests.table(base_path, self.config)
        return await asyncio.to_thread(HoodieTable.open, uri)

    async def SchedulePlan(  # noqa: N802 (gRPC method name)
        self, request: pb.SchedulePlanRequest, context: Context
    ) -> pb.SchedulePlanResponse:
        table = await self._table(request.table.base_path)
        options = requests.plan_options(request.options)
        result = await asyncio.to_thread(self.engine.schedule, table, options)
        if result.plan is None:
            return pb.SchedulePlanResponse(reason=result.reason)
        return pb.SchedulePlanResponse(plan=messages.plan_message(result.plan))

    async def ListPlans(  # noqa: N802 (gRPC method name)
        self, request: pb.ListPlansRequest, context: Context
    ) -> pb.ListPlansResponse:
        table = await self._table(request.table.base_path)
        plans, given_up = await asyncio.to_thread(self.engine.list_plans, table)
        return pb.ListPlansResponse(
            plans=[messages.plan_message(plan) for plan in plans],
            given_up=[messages.given_up_message(gone) for gone in given_up],
        )

    async def GetPlan(  # noqa: N802 (gRPC method name)
        self, request: pb.GetPlanRequest, context: Context
    ) -> pb.GetPlanResponse:
        table = await self._table(request.table.base_path)
        instant = requests.instant_time(request.instant_time)
        plan = await asyncio.to_thread(self.engine.get_plan, table, instant)
        return pb.GetPlanResponse(plan=messages.plan_message(plan))

    async def CancelPlan(  # noqa: N802 (gRPC method name)
        self, request: pb.CancelPlanRequest, context: Context
    ) -> pb.CancelPlanResponse:
        table = await self._table(request.table.base_path)
        instant = requests.instant_time(request.instant_time)
        result = await asyncio.to_thread(self.engine.cancel, table, instant)
        return pb.CancelPlanResponse(rollback_instant_time=result.rollback_instant)

    async def SetTriggerPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.SetTriggerPolicyRequest, context: Context
    ) -> pb.SetTriggerPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = requests.trigger_policy(request.policy)
        saved = await asyncio.to_thread(self.engine.set_policy, table, policy)
        return pb.SetTriggerPolicyResponse(policy=messages.policy_message(saved))

    async def GetTriggerPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.GetTriggerPolicyRequest, context: Context
    ) -> pb.GetTriggerPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = await asyncio.to_thread(self.engine.get_policy, table)
        return pb.GetTriggerPolicyResponse(policy=messages.policy_message(policy))

    async def SetRetentionPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.SetRetentionPolicyRequest, context: Context
    ) -> pb.SetRetentionPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = retention.policy_from_message(request.policy)
        saved = await asyncio.to_thread(self.engine.set_retention, table, policy)
        return pb.SetRetentionPolicyResponse(policy=retention.policy_message(saved))

    async def GetRetentionPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.GetRetentionPolicyRequest, context: Context
    ) -> pb.GetRetentionPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = await asyncio.to_thread(self.engine.get_retention, table)
        return pb.GetRetentionPolicyResponse(policy=retention.policy_message(policy))

    async def RunRetention(  # noqa: N802 (gRPC method name)
        self, request: pb.RunRetentionRequest, context: Context
    ) -> pb.RunRetentionResponse:
        table = await self._table(request.table.base_path)
        result = await asyncio.to_thread(self.engine.run_retention, table)
        return pb.RunRetentionResponse(
            clean_instant_times=result.clean.instants,
            files_deleted=result.clean.files_deleted,
            earliest_readable_instant_time=result.clean.earliest_to_retain or "",
            archived_instants=result.archive.archived,
        )

    async def ScheduleCompaction(  # noqa: N802 (gRPC method name)
        self, request: pb.ScheduleCompactionRequest, context: Context
    ) -> pb.ScheduleCompactionResponse:
        table = await self._table(request.table.base_path)
        settings = compaction.settings_from_message(request.options, "options")
        pending, reason = await asyncio.to_thread(self.engine.schedule_compaction, table, settings)
        if pending is None:
            return pb.ScheduleCompactionResponse(reason=reason)
        return pb.ScheduleCompactionResponse(plan=compaction.plan_message(pending))

    async def ListCompactions(  # noqa: N802 (gRPC method name)
        self, request: pb.ListCompactionsRequest, context: Context
    ) -> pb.ListCompactionsResponse:
        table = await self._table(request.table.base_path)
        pending = await asyncio.to_thread(self.engine.list_compactions, table)
        return pb.ListCompactionsResponse(plans=[compaction.plan_message(p) for p in pending])

    async def CancelCompaction(  # noqa: N802 (gRPC method name)
        self, request: pb.CancelCompactionRequest, context: Context
    ) -> pb.CancelCompactionResponse:
        table = await self._table(request.table.base_path)
        instant = requests.instant_time(request.instant_time)
        cancelled = await asyncio.to_thread(self.engine.cancel_compaction, table, instant)
        return pb.CancelCompactionResponse(plan=compaction.plan_message(cancelled))

    async def SetCompactionPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.SetCompactionPolicyRequest, context: Context
    ) -> pb.SetCompactionPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = compaction.policy_from_message(request.policy)
        saved = await asyncio.to_thread(self.engine.set_compaction_policy, table, policy)
        return pb.SetCompactionPolicyResponse(policy=compaction.policy_message(saved))

    async def GetCompactionPolicy(  # noqa: N802 (gRPC method name)
        self, request: pb.GetCompactionPolicyRequest, context: Context
    ) -> pb.GetCompactionPolicyResponse:
        table = await self._table(request.table.base_path)
        policy = await asyncio.to_thread(self.engine.get_compaction_policy, table)
        return pb.GetCompactionPolicyResponse(policy=compaction.policy_message(policy))
