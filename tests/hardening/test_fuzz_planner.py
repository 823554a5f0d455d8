"""Fuzzing every RPC of the planner service (a real ``tidemark serve planner`` process,
triggers polled hourly so only calls change files): see ``fuzzkit.fuzz_service`` for
what is sent and checked. Plan options fuzz sort columns, layouts (also unknown enum
values), partition filters (bad regexes, odd paths, any count) and 64-bit sizes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import strategies as st
from planner.plankit import new_table

from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import ClientConfig
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.planner.v1 import planner_service_pb2 as pb

from .fuzzkit import PRECONDITION, FuzzedServer, Rpc, fuzz_service, mostly, texts_or

SERVICE = "tidemark.planner.v1.PlannerService"
SCHEDULE = Rpc(f"/{SERVICE}/SchedulePlan", also=PRECONDITION)
LIST = Rpc(f"/{SERVICE}/ListPlans", also=PRECONDITION)
GET = Rpc(f"/{SERVICE}/GetPlan", also=PRECONDITION)
CANCEL = Rpc(f"/{SERVICE}/CancelPlan", also=PRECONDITION)
SET_POLICY = Rpc(f"/{SERVICE}/SetTriggerPolicy", also=PRECONDITION)
GET_POLICY = Rpc(f"/{SERVICE}/GetTriggerPolicy", also=PRECONDITION)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzedServer]:
    root = tmp_path_factory.mktemp("fuzz-planner")
    new_table(root, {"eu": [20, 30, 40], "us": [10, 15]})
    fuzzed = FuzzedServer("planner", root, {"TIDEMARK_PLANNER_TRIGGER_POLL_S": "3600"})
    yield fuzzed
    fuzzed.close()


@pytest.fixture(scope="module")
def planned(server: FuzzedServer) -> str:
    """The instant of a plan scheduled before the run (GetPlan and CancelPlan name it)."""
    client = PlannerClient(server.process.address, ClientConfig(token_file=str(server.tokens)))
    response = client.schedule(str(server.root / "people"), plan_options(sort_columns=["name"]))
    assert response.plan.instant_time
    return response.plan.instant_time


def _options() -> st.SearchStrategy[pb.PlanOptions]:
    partitions = st.one_of(
        st.just(pb.PartitionFilter(all=pb.AllPartitions())),
        st.integers(0, (1 << 32) - 1).map(
            lambda count: pb.PartitionFilter(recent=pb.RecentPartitions(count=count))
        ),
        texts_or("e.*", "(", "[a-", "(a+)+$", "").map(
            lambda regex: pb.PartitionFilter(regex=regex)
        ),
        st.lists(texts_or("eu", "us"), max_size=4).map(
            lambda paths: pb.PartitionFilter(list=pb.PartitionList(partition_paths=paths))
        ),
        st.just(pb.PartitionFilter()),
    )
    size = st.one_of(st.none(), mostly(st.integers(1, 1 << 30), INT64))
    return st.builds(
        pb.PlanOptions,
        sort_columns=st.lists(texts_or("name", "id", "score", "region"), max_size=4),
        layout=mostly(st.sampled_from([1, 2, 3]), st.integers(-3, 9)),
        partitions=partitions,
        target_file_bytes=size,
        small_file_limit_bytes=size,
        max_bytes_per_group=size,
        max_groups=st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1)),
    )


def _policy() -> st.SearchStrategy[pb.TriggerPolicy]:
    uint32 = st.integers(0, (1 << 32) - 1)
    return st.one_of(
        st.builds(pb.TriggerPolicy, on_demand=st.just(pb.OnDemand()), options=_options()),
        st.builds(pb.TriggerPolicy, every_n_commits=uint32, options=_options()),
        st.builds(pb.TriggerPolicy, every_seconds=uint32, options=_options()),
        st.builds(pb.TriggerPolicy, options=_options()),
    )


def _rpcs(root: Path, planned: str) -> dict[Rpc, st.SearchStrategy[bytes]]:
    table = st.builds(TableRef, base_path=texts_or(str(root / "people"), str(root)))
    instant = texts_or(planned, "20240101000000000", "2099")
    return {
        SCHEDULE: st.builds(pb.SchedulePlanRequest, table=table, options=_options()).map(
            pb.SchedulePlanRequest.SerializeToString
        ),
        LIST: st.builds(pb.ListPlansRequest, table=table).map(
            pb.ListPlansRequest.SerializeToString
        ),
        GET: st.builds(pb.GetPlanRequest, table=table, instant_time=instant).map(
            pb.GetPlanRequest.SerializeToString
        ),
        CANCEL: st.builds(pb.CancelPlanRequest, table=table, instant_time=instant).map(
            pb.CancelPlanRequest.SerializeToString
        ),
        SET_POLICY: st.builds(
            pb.SetTriggerPolicyRequest, table=table, policy=mostly(_policy(), st.none())
        ).map(pb.SetTriggerPolicyRequest.SerializeToString),
        GET_POLICY: st.builds(pb.GetTriggerPolicyRequest, table=table).map(
            pb.GetTriggerPolicyRequest.SerializeToString
        ),
    }


def _valid(root: Path, planned: str) -> dict[Rpc, bytes]:
    table = TableRef(base_path=str(root / "people"))
    options = plan_options(sort_columns=["name"])
    policy = pb.TriggerPolicy(on_demand=pb.OnDemand(), options=options)
    return {
        LIST: pb.ListPlansRequest(table=table).SerializeToString(),
        GET: pb.GetPlanRequest(table=table, instant_time=planned).SerializeToString(),
        CANCEL: pb.CancelPlanRequest(table=table, instant_time=planned).SerializeToString(),
        SCHEDULE: pb.SchedulePlanRequest(table=table, options=options).SerializeToString(),
        SET_POLICY: pb.SetTriggerPolicyRequest(table=table, policy=policy).SerializeToString(),
        GET_POLICY: pb.GetTriggerPolicyRequest(table=table).SerializeToString(),
    }


def test_the_planner_service_answers_fuzzed_calls_with_defined_codes(
    server: FuzzedServer, planned: str
) -> None:
    rpcs, valid = _rpcs(server.root, planned), _valid(server.root, planned)
    fuzz_service(server, rpcs, valid, [SERVICE], examples=150, probe=LIST)
